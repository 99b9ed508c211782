// Selective scan and causal conv1d throughput at Mamba-block sizes.
// Counters are rates: Gelem = 1e9 state updates (B*T*D*N) or, for conv1d,
// outputs per second; GB = 1e9 bytes per second, each input and output tensor
// counted once. Real time, since the kernels run on all OpenMP threads.
#include <benchmark/benchmark.h>

#include <vector>

#include "core/rng.h"
#include "kernels/cpu/conv1d.h"
#include "kernels/cpu/selective_scan.h"

namespace hymba {
namespace {

std::vector<float> uniform(size_t n, Rng& rng, float lo, float hi) {
  std::vector<float> v(n);
  for (auto& x : v) x = lo + (hi - lo) * rng.uniform();
  return v;
}

constexpr int64_t kScanBatch = 2, kScanChannels = 512, kScanStates = 16;

struct ScanProblem {
  int64_t B, T, D, N;
  std::vector<float> u, delta, delta_bias, A_log, Bm, Cm, Dskip, z, y, chunk_states, dy;
  std::vector<float> du, ddelta, ddelta_bias, dA_log, dB, dC, dDskip, dz;
  cpu::ScanArgs args;
  cpu::ScanGrads grads;

  ScanProblem(int64_t batch, int64_t tokens, int64_t channels, int64_t states)
      : B(batch), T(tokens), D(channels), N(states) {
    Rng rng(7);
    const size_t BTD = B * T * D, BTN = B * T * N;
    u = uniform(BTD, rng, -1.0f, 1.0f);
    delta = uniform(BTD, rng, -3.0f, 1.0f);
    delta_bias = uniform(D, rng, -0.5f, 0.5f);
    A_log = uniform(D * N, rng, 0.0f, 2.8f);
    Bm = uniform(BTN, rng, -1.0f, 1.0f);
    Cm = uniform(BTN, rng, -1.0f, 1.0f);
    Dskip = uniform(D, rng, 0.5f, 1.5f);
    z = uniform(BTD, rng, -2.0f, 2.0f);
    dy = uniform(BTD, rng, -1.0f, 1.0f);
    y.resize(BTD);
    chunk_states.resize(B * cpu::scan_num_chunks(T) * D * N);
    du.resize(BTD), ddelta.resize(BTD), dz.resize(BTD), dB.resize(BTN), dC.resize(BTN);
    ddelta_bias.resize(D), dA_log.resize(D * N), dDskip.resize(D);
    args.B = B, args.T = T, args.D = D, args.N = N;
    args.u = u.data(), args.ld_u = D;
    args.delta = delta.data(), args.ld_delta = D;
    args.delta_bias = delta_bias.data();
    args.delta_softplus = true;
    args.A_log = A_log.data();
    args.Bm = Bm.data(), args.ld_B = N;
    args.Cm = Cm.data(), args.ld_C = N;
    args.Dskip = Dskip.data();
    args.z = z.data(), args.ld_z = D;
    grads.du = du.data(), grads.ld_du = D;
    grads.ddelta = ddelta.data(), grads.ld_ddelta = D;
    grads.ddelta_bias = ddelta_bias.data();
    grads.dA_log = dA_log.data();
    grads.dB = dB.data(), grads.ld_dB = N;
    grads.dC = dC.data(), grads.ld_dC = N;
    grads.dDskip = dDskip.data();
    grads.dz = dz.data(), grads.ld_dz = D;
  }

  double state_updates() const { return static_cast<double>(B * T * D * N); }
  double chunk_state_bytes() const { return 4.0 * static_cast<double>(chunk_states.size()); }
  // u, delta, z, y and B, C: the per-token tensors.
  double forward_bytes() const { return 4.0 * (4.0 * B * T * D + 2.0 * B * T * N) + chunk_state_bytes(); }
  // Forward's inputs, dy, chunk states, and du, ddelta, dz, dB, dC.
  double backward_bytes() const { return 4.0 * (7.0 * B * T * D + 4.0 * B * T * N) + chunk_state_bytes(); }
};

void set_counters(benchmark::State& state, double elements, double bytes) {
  state.counters["Gelem"] = benchmark::Counter(elements * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GB"] = benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_ScanForward(benchmark::State& state) {
  ScanProblem p(kScanBatch, state.range(0), kScanChannels, kScanStates);
  for (auto _ : state) {
    cpu::selective_scan_forward(p.y.data(), p.chunk_states.data(), nullptr, p.args);
    benchmark::DoNotOptimize(p.y.data());
    benchmark::ClobberMemory();
  }
  set_counters(state, p.state_updates(), p.forward_bytes());
}

void BM_ScanBackward(benchmark::State& state) {
  ScanProblem p(kScanBatch, state.range(0), kScanChannels, kScanStates);
  cpu::selective_scan_forward(p.y.data(), p.chunk_states.data(), nullptr, p.args);
  for (auto _ : state) {
    cpu::selective_scan_backward(p.grads, p.dy.data(), p.chunk_states.data(), p.args);
    benchmark::DoNotOptimize(p.du.data());
    benchmark::ClobberMemory();
  }
  set_counters(state, p.state_updates(), p.backward_bytes());
}

BENCHMARK(BM_ScanForward)->Arg(256)->Arg(1024)->Arg(4096)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_ScanBackward)->Arg(256)->Arg(1024)->Arg(4096)->Unit(benchmark::kMillisecond)->UseRealTime();

// Conv1d over the Mamba x branch: B=2, T=1024, C=1024, K=4.
struct ConvProblem {
  static constexpr int64_t B = 2, T = 1024, C = 1024, K = 4;
  std::vector<float> x, w, bias, out, dout, dx, dw, db;

  ConvProblem() {
    Rng rng(9);
    x = uniform(B * T * C, rng, -1.0f, 1.0f);
    w = uniform(C * K, rng, -0.5f, 0.5f);
    bias = uniform(C, rng, -0.5f, 0.5f);
    dout = uniform(B * T * C, rng, -1.0f, 1.0f);
    out.resize(B * T * C), dx.resize(B * T * C), dw.resize(C * K), db.resize(C);
  }
  double elements() const { return static_cast<double>(B * T * C); }
};

void BM_ConvForward(benchmark::State& state) {
  ConvProblem p;
  for (auto _ : state) {
    cpu::conv1d_causal_forward(p.out.data(), p.x.data(), p.C, p.w.data(), p.bias.data(), p.B, p.T, p.C, p.K);
    benchmark::DoNotOptimize(p.out.data());
    benchmark::ClobberMemory();
  }
  set_counters(state, p.elements(), 4.0 * 2.0 * p.elements());  // x in, out
}

void BM_ConvBackward(benchmark::State& state) {
  ConvProblem p;
  for (auto _ : state) {
    cpu::conv1d_causal_backward(p.dx.data(), p.C, p.dw.data(), p.db.data(), p.dout.data(), p.x.data(), p.C, p.w.data(),
                                p.B, p.T, p.C, p.K);
    benchmark::DoNotOptimize(p.dx.data());
    benchmark::ClobberMemory();
  }
  set_counters(state, p.elements(), 4.0 * 3.0 * p.elements());  // dout, x in; dx out
}

BENCHMARK(BM_ConvForward)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_ConvBackward)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace hymba
