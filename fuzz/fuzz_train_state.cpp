// A run directory being resumed: train_state.json (typed fields, the run's
// recipe compared with the command line's), as `hymba train --resume` reads
// it before loading anything else.
#include "fuzz_util.h"
#include "train/trainer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const hymba::TrainOptions options = [] {
    // The recipe of the seed run (tools/make_fuzz_seeds.py): mutations that
    // keep it reach the checks after the recipe comparison.
    hymba::TrainOptions o;
    o.data = "default";
    o.out_dir = "run";
    o.batch = 2;
    o.seq_len = 8;
    return o;
  }();
  hymba::fuzz::expect_clean([&] {
    hymba::check_train_state("run/ckpt-1/train_state.json", std::string(hymba::fuzz::as_text(data, size)), options);
  });
  return 0;
}
