#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/params.h"
#include "core/rng.h"
#include "core/safetensors.h"
#include "test_util.h"

namespace hymba {
namespace {

namespace fs = std::filesystem;

// A fresh directory per test, removed afterwards.
class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("hymba_st_" + std::string(info->test_suite_name()) + "_" + info->name() + "_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string file(const std::string& name) const { return (dir_ / name).string(); }
  std::vector<std::string> listing() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir_)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }

 private:
  fs::path dir_;
};

std::string le64(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[static_cast<size_t>(i)] = static_cast<char>(v >> (8 * i));
  return s;
}

template <typename T>
std::string raw_bytes(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

// A safetensors file from its parts, exactly as given (no padding added).
std::string build_file(const std::string& header, const std::string& data) {
  return le64(header.size()) + header + data;
}

void write_raw(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

using test::expect_error;

bool same_bits(float a, float b) { return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b); }

TEST(Safetensors, RoundTripsTensorsAndMetadata) {
  TempDir dir;
  const std::string path = dir.file("model.safetensors");
  Rng rng(5);
  std::vector<float> a(6), b(5), scalar{3.5f};
  for (auto& x : a) x = rng.normal();
  for (auto& x : b) x = rng.normal();
  b[1] = std::numeric_limits<float>::infinity();
  b[2] = -0.0f;
  b[3] = std::numeric_limits<float>::quiet_NaN();
  save_safetensors(path,
                   {{"layers.0.a", {2, 3}, a.data()},
                    {"b", {5}, b.data()},
                    {"scalar", Shape{}, scalar.data()},
                    {"empty", {0, 4}, nullptr}},
                   {{"format", "pt"}, {"step", "42"}});

  SafetensorsFile f = SafetensorsFile::open(path);
  ASSERT_EQ(f.entries().size(), 4u);
  const char* names[] = {"layers.0.a", "b", "scalar", "empty"};  // data order = given order
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(f.entries()[i].name, names[i]);
    EXPECT_EQ(f.entries()[i].dtype, "F32");
  }
  EXPECT_EQ(f.find("layers.0.a")->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(f.find("scalar")->shape, std::vector<int64_t>{});
  EXPECT_EQ(f.find("empty")->shape_str(), "[0,4]");
  EXPECT_EQ(f.find("missing"), nullptr);
  EXPECT_EQ(f.metadata(), (std::map<std::string, std::string>{{"format", "pt"}, {"step", "42"}}));

  auto a2 = f.read_f32("layers.0.a");
  auto b2 = f.read_f32("b");
  ASSERT_EQ(a2.size(), a.size());
  ASSERT_EQ(b2.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(same_bits(a[i], a2[i])) << i;
  for (size_t i = 0; i < b.size(); ++i) EXPECT_TRUE(same_bits(b[i], b2[i])) << i;
  EXPECT_EQ(f.read_f32("scalar"), scalar);
  EXPECT_TRUE(f.read_f32("empty").empty());

  // Moving the handle keeps it usable.
  SafetensorsFile moved = std::move(f);
  EXPECT_EQ(moved.read_f32("scalar"), scalar);
}

// Narrowed writes store the rounded bit patterns (tie cases included, across
// the staging buffer's 65536-element chunks) and read back as those values.
TEST(Safetensors, WritesBf16AndF16RoundedToNearestEven) {
  TempDir dir;
  std::vector<float> v(70000);
  Rng rng(9);
  for (auto& x : v) x = rng.normal() * 100.0f;
  v[0] = std::bit_cast<float>(0x3F808000u);      // bf16 tie -> 0x3F80; f16 exact
  v[1] = std::bit_cast<float>(0x3F801000u);      // f16 tie -> 0x3C00
  v[2] = 65519.0f;                               // f16: 0x7BFF
  v[3] = std::ldexp(1.5f, -24);                  // f16 subnormal tie -> 0x0002
  v[69999] = std::bit_cast<float>(0x3F818000u);  // bf16 tie -> 0x3F82, in the second chunk
  const std::vector<NamedTensor> tensors{{"w", {70000}, v.data()}, {"s", Shape{}, v.data() + 2}};
  for (FloatFormat format : {FloatFormat::kBF16, FloatFormat::kF16}) {
    const std::string path = dir.file(std::string(to_string(format)) + ".safetensors");
    save_safetensors(path, tensors, {{"format", "pt"}}, format);
    SafetensorsFile f = SafetensorsFile::open(path);
    EXPECT_EQ(f.find("w")->dtype, safetensors_dtype(format));
    EXPECT_EQ(f.find("w")->end - f.find("w")->begin, 140000u);
    const std::vector<float> back = f.read_f32("w");
    for (size_t i = 0; i < v.size(); ++i) ASSERT_TRUE(same_bits(back[i], round_to_format(format, v[i]))) << i;
    EXPECT_TRUE(same_bits(f.read_f32("s")[0], round_to_format(format, 65519.0f)));
    // The raw bytes of the first elements, as hand-computed.
    const std::string bytes = read_file(path);
    const std::size_t data = 8 + static_cast<std::size_t>(static_cast<unsigned char>(bytes[0])) +
                             256 * static_cast<std::size_t>(static_cast<unsigned char>(bytes[1]));
    auto at = [&](std::size_t i) {
      return static_cast<uint16_t>(static_cast<unsigned char>(bytes[data + 2 * i]) |
                                   static_cast<unsigned char>(bytes[data + 2 * i + 1]) << 8);
    };
    if (format == FloatFormat::kBF16) {
      EXPECT_EQ(at(0), 0x3F80);
      EXPECT_EQ(at(69999), 0x3F82);
    } else {
      EXPECT_EQ(at(1), 0x3C00);
      EXPECT_EQ(at(2), 0x7BFF);
      EXPECT_EQ(at(3), 0x0002);
    }
  }
}

// A finite value the format would turn into infinity is refused before the
// file is created; f32 takes it, bf16 takes anything float32 below 3.39e38.
TEST(Safetensors, NarrowingOverflowIsAnErrorNamingTensorAndValue) {
  TempDir dir;
  const std::string path = dir.file("x.safetensors");
  std::vector<float> v{1.0f, -70000.0f};
  expect_error([&] { save_safetensors(path, {{"ok", {1}, v.data()}, {"big", {2}, v.data()}}, {}, FloatFormat::kF16); },
               {path, "'big'", "-70000", "index 1", "float16", "65504"});
  EXPECT_TRUE(dir.listing().empty());
  v[1] = 65519.0f;  // rounds to 65504: representable
  save_safetensors(path, {{"big", {2}, v.data()}}, {}, FloatFormat::kF16);
  EXPECT_EQ(SafetensorsFile::open(path).read_f32("big")[1], 65504.0f);
  v[1] = std::numeric_limits<float>::max();
  expect_error([&] { save_safetensors(path, {{"huge", {2}, v.data()}}, {}, FloatFormat::kBF16); },
               {path, "'huge'", "bfloat16"});
  save_safetensors(path, {{"huge", {2}, v.data()}}, {}, FloatFormat::kF32);
}

TEST(Safetensors, ByteLayoutIsTheSafetensorsFormat) {
  TempDir dir;
  const std::string path = dir.file("w.safetensors");
  std::vector<float> w{1.0f, -2.0f}, bias{0.5f};
  save_safetensors(path, {{"w", {2}, w.data()}, {"b", {1, 1}, bias.data()}}, {{"k", "v"}});

  std::string header = R"({"__metadata__":{"k":"v"},)"
                       R"("w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                       R"("b":{"dtype":"F32","shape":[1,1],"data_offsets":[8,12]}})";
  header.append((8 - header.size() % 8) % 8, ' ');  // the reference writer's padding
  ASSERT_EQ(header.size() % 8, 0u);
  const std::string expected = le64(header.size()) + header + raw_bytes(w) + raw_bytes(bias);
  const std::string actual = read_file(path);
  EXPECT_EQ(actual.size(), expected.size());
  EXPECT_EQ(actual, expected);

  // No metadata: no "__metadata__" key at all.
  save_safetensors(path, {{"w", {2}, w.data()}});
  const std::string plain = read_file(path);
  const std::string json = R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  EXPECT_EQ(plain.substr(8, json.size()), json);
  EXPECT_EQ(plain.substr(0, 8), le64((json.size() + 7) / 8 * 8));
}

TEST(Safetensors, ReadsBf16AndAnyHeaderOrder) {
  TempDir dir;
  const std::string path = dir.file("bf16.safetensors");
  // 1, -3, 3.140625, +inf, the smallest bf16 subnormal, -0.
  std::vector<uint16_t> x{0x3F80, 0xC040, 0x4049, 0x7F80, 0x0001, 0x8000};
  std::vector<uint16_t> y{0x7FC0, 0x4000};
  // "y" comes first in the header but second in the data.
  const std::string header = R"({"y":{"dtype":"BF16","shape":[2],"data_offsets":[12,16]},)"
                             R"("x":{"dtype":"BF16","shape":[2,3],"data_offsets":[0,12]}})";
  write_raw(path, build_file(header, raw_bytes(x) + raw_bytes(y)));

  SafetensorsFile f = SafetensorsFile::open(path);
  ASSERT_EQ(f.entries().size(), 2u);
  EXPECT_EQ(f.entries()[0].name, "x");
  EXPECT_EQ(f.entries()[1].name, "y");
  EXPECT_TRUE(f.metadata().empty());
  auto xs = f.read_f32("x");
  ASSERT_EQ(xs.size(), 6u);
  EXPECT_EQ(xs[0], 1.0f);
  EXPECT_EQ(xs[1], -3.0f);
  EXPECT_EQ(xs[2], 3.140625f);
  EXPECT_EQ(xs[3], std::numeric_limits<float>::infinity());
  EXPECT_EQ(xs[4], std::ldexp(1.0f, -133));
  EXPECT_TRUE(same_bits(xs[5], -0.0f));
  auto ys = f.read_f32("y");
  EXPECT_TRUE(std::isnan(ys[0]));
  EXPECT_EQ(ys[1], 2.0f);
}

TEST(Safetensors, ReadsF16IncludingSubnormalsInfAndNegatives) {
  TempDir dir;
  const std::string path = dir.file("f16.safetensors");
  std::vector<uint16_t> h{0x3C00, 0xC000, 0x0001, 0x8001, 0x03FF, 0x0400, 0x7BFF,
                          0x7C00, 0xFC00, 0x7E00, 0x8000, 0x3555, 0xBC00, 0x0000};
  const std::string header =
      R"({"__metadata__":{"source":"hand"},"h":{"dtype":"F16","shape":[14],"data_offsets":[0,28]}})";
  write_raw(path, build_file(header, raw_bytes(h)));

  SafetensorsFile f = SafetensorsFile::open(path);
  EXPECT_EQ(f.metadata().at("source"), "hand");
  std::vector<float> v(14);
  f.read_into("h", v.data(), 14);
  EXPECT_EQ(v[0], 1.0f);
  EXPECT_EQ(v[1], -2.0f);
  EXPECT_EQ(v[2], std::ldexp(1.0f, -24));         // smallest subnormal
  EXPECT_EQ(v[3], -std::ldexp(1.0f, -24));        // negative subnormal
  EXPECT_EQ(v[4], 1023 * std::ldexp(1.0f, -24));  // largest subnormal
  EXPECT_EQ(v[5], std::ldexp(1.0f, -14));         // smallest normal
  EXPECT_EQ(v[6], 65504.0f);                      // largest finite
  EXPECT_EQ(v[7], std::numeric_limits<float>::infinity());
  EXPECT_EQ(v[8], -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(v[9]));
  EXPECT_TRUE(same_bits(v[10], -0.0f));
  EXPECT_EQ(v[11], 0.333251953125f);
  EXPECT_EQ(v[12], -1.0f);
  EXPECT_TRUE(same_bits(v[13], 0.0f));
}

TEST(Safetensors, ReadErrorsNameFileAndTensor) {
  TempDir dir;
  const std::string path = dir.file("m.safetensors");
  std::vector<int64_t> ints{1, 2};
  write_raw(path, build_file(R"({"ids":{"dtype":"I64","shape":[2],"data_offsets":[0,16]}})", raw_bytes(ints)));
  SafetensorsFile f = SafetensorsFile::open(path);
  EXPECT_EQ(f.find("ids")->dtype, "I64");
  expect_error([&] { f.read_f32("ids"); }, {path, "'ids'", "I64"});
  expect_error([&] { f.read_f32("nope"); }, {path, "'nope'"});
  float out[3];
  write_raw(path, build_file(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", std::string(8, '\0')));
  SafetensorsFile g = SafetensorsFile::open(path);
  expect_error([&] { g.read_into("x", out, 3); }, {path, "'x'", "2 elements"});
  expect_error([] { SafetensorsFile::open("/nonexistent/dir/x.safetensors"); },
               {"/nonexistent/dir/x.safetensors", std::strerror(ENOENT)});
}

TEST(Safetensors, HeaderValidationErrors) {
  TempDir dir;
  const std::string path = dir.file("bad.safetensors");
  const std::string data(16, '\0');
  struct Case {
    std::string header;
    std::vector<std::string> parts;
  };
  const std::vector<Case> cases = {
      {R"({"t":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]})", {"not valid JSON"}},
      {R"([1,2])", {"not a JSON object"}},
      {R"({"t":[1]})", {"'t'", "not an object"}},
      {R"({"t":{"shape":[4],"data_offsets":[0,16]}})", {"'t'", "dtype"}},
      {R"({"t":{"dtype":7,"shape":[4],"data_offsets":[0,16]}})", {"'t'", "dtype"}},
      {R"({"t":{"dtype":"Q4","shape":[4],"data_offsets":[0,16]}})", {"'t'", "unknown dtype 'Q4'"}},
      {R"({"t":{"dtype":"F32","data_offsets":[0,16]}})", {"'t'", "shape"}},
      {R"({"t":{"dtype":"F32","shape":4,"data_offsets":[0,16]}})", {"'t'", "shape"}},
      {R"({"t":{"dtype":"F32","shape":[-4],"data_offsets":[0,16]}})", {"'t'", "shape"}},
      {R"({"t":{"dtype":"F32","shape":[2.5],"data_offsets":[0,16]}})", {"'t'", "shape"}},
      {R"({"t":{"dtype":"F32","shape":[4]}})", {"'t'", "data_offsets"}},
      {R"({"t":{"dtype":"F32","shape":[4],"data_offsets":[0]}})", {"'t'", "data_offsets"}},
      {R"({"t":{"dtype":"F32","shape":[4],"data_offsets":[-1,16]}})", {"'t'", "data_offsets"}},
      {R"({"t":{"dtype":"F32","shape":[4],"data_offsets":["0","16"]}})", {"'t'", "data_offsets"}},
      {R"({"t":{"dtype":"F32","shape":[0],"data_offsets":[8,4]}})", {"'t'", "end before begin"}},
      {R"({"t":{"dtype":"F32","shape":[8],"data_offsets":[0,32]}})", {"'t'", "past the end"}},
      {R"({"t":{"dtype":"F32","shape":[3],"data_offsets":[0,16]}})", {"'t'", "needs 12"}},
      {R"({"t":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,16]}})", {"'t'", "overflows"}},
      {R"({"t":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},"t":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})",
       {"'t'", "twice"}},
      {R"({"__metadata__":{"k":1}})", {"metadata 'k'"}},
      {R"({"__metadata__":[]})", {"__metadata__"}},
      {"", {"not valid JSON"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.header);
    write_raw(path, build_file(c.header, data));
    std::vector<std::string> parts = c.parts;
    parts.push_back(path);
    expect_error([&] { SafetensorsFile::open(path); }, parts);
  }

  // Lengths that do not fit the file.
  write_raw(path, le64(1000) + "{}");
  expect_error([&] { SafetensorsFile::open(path); }, {path, "header length 1000", "past the end of the file"});
  write_raw(path, le64(uint64_t{1} << 62) + "{}");
  expect_error([&] { SafetensorsFile::open(path); }, {path, "100 MB"});
  write_raw(path, "abc");
  expect_error([&] { SafetensorsFile::open(path); }, {path, "too short"});
  expect_error([&] { SafetensorsFile::open(dir.file("")); }, {"directory"});
}

// A small model-like table: names and shapes as the real model uses them.
ParamTable make_table() {
  ParamTable t;
  t.add("model.embed_tokens.weight", {10, 4}, InitRule::normal(0.02f));
  t.add("model.layers.0.mamba.A_log.0", {8, 16}, InitRule::mamba_a_log(), false);
  t.add("model.layers.0.norm.weight", {4}, InitRule::ones(), false);
  t.allocate(false, false);
  return t;
}

std::vector<float> values_of(const ParamTable& t) {
  std::vector<float> out;
  t.for_each([&](const ParamInfo& p, const float* v) { out.insert(out.end(), v, v + p.shape.numel()); });
  return out;
}

TEST(Safetensors, SaveAndLoadParams) {
  TempDir dir;
  const std::string path = dir.file("model.safetensors");
  ParamTable src = make_table();
  src.init(Rng(1));
  save_params(path, src, {{"step", "7"}});

  ParamTable dst = make_table();
  load_params(path, dst);
  EXPECT_EQ(values_of(dst), values_of(src));
  EXPECT_EQ(SafetensorsFile::open(path).metadata().at("step"), "7");

  // A half-precision checkpoint of the same model loads too (converted).
  std::string header = "{";
  std::string data;
  uint64_t off = 0;
  src.for_each([&](const ParamInfo& p, const float* v) {
    std::vector<uint16_t> half;
    for (int64_t i = 0; i < p.shape.numel(); ++i)
      half.push_back(static_cast<uint16_t>(std::bit_cast<uint32_t>(v[i]) >> 16));
    if (off > 0) header += ",";
    header += "\"" + p.name + "\":{\"dtype\":\"BF16\",\"shape\":" + p.shape.str() + ",\"data_offsets\":[" +
              std::to_string(off) + "," + std::to_string(off + 2 * half.size()) + "]}";
    off += 2 * half.size();
    data += raw_bytes(half);
  });
  header += "}";
  const std::string half_path = dir.file("half.safetensors");
  write_raw(half_path, build_file(header, data));
  ParamTable from_half = make_table();
  load_params(half_path, from_half);
  std::vector<float> want = values_of(src), got = values_of(from_half);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_EQ(got[i], std::bit_cast<float>(std::bit_cast<uint32_t>(want[i]) & 0xFFFF0000u)) << i;
}

TEST(Safetensors, LoadParamsReportsTheFirstMismatch) {
  TempDir dir;
  const std::string path = dir.file("model.safetensors");
  ParamTable src = make_table();
  src.init(Rng(2));
  const Tensor embed = src.value("model.embed_tokens.weight");
  const Tensor alog = src.value("model.layers.0.mamba.A_log.0");
  const Tensor norm = src.value("model.layers.0.norm.weight");
  std::vector<float> zeros(64, 0.0f);

  // The table must come out of every failed load untouched.
  // Filled with a value no checkpoint here holds, so any partial load shows.
  ParamTable dst = make_table();
  dst.for_each([](ParamSlot& s) { std::fill(s.value, s.value + s.numel(), 42.0f); });
  const std::vector<float> before = values_of(dst);
  auto expect_load_error = [&](const std::vector<std::string>& parts) {
    expect_error([&] { load_params(path, dst); }, parts);
    EXPECT_EQ(values_of(dst), before);
  };

  save_safetensors(path, {{"model.embed_tokens.weight", embed.shape, embed.data},
                          {"model.layers.0.norm.weight", norm.shape, norm.data}});
  expect_load_error({path, "'model.layers.0.mamba.A_log.0'", "missing"});

  save_safetensors(path, {{"model.embed_tokens.weight", embed.shape, embed.data},
                          {"model.layers.0.mamba.A_log.0", alog.shape, alog.data},
                          {"model.layers.0.norm.weight", norm.shape, norm.data},
                          {"lm_head.weight", {4, 10}, zeros.data()}});
  expect_load_error({path, "unexpected tensor 'lm_head.weight'"});

  save_safetensors(path, {{"model.embed_tokens.weight", embed.shape, embed.data},
                          {"model.layers.0.mamba.A_log.0", {8, 4}, alog.data},
                          {"model.layers.0.norm.weight", norm.shape, norm.data}});
  expect_load_error({path + ": tensor 'model.layers.0.mamba.A_log.0' has shape [8,4], expected [8,16]"});

  save_safetensors(path, {{"model.embed_tokens.weight", embed.shape, embed.data},
                          {"model.layers.0.mamba.A_log.0", {8, 16, 1}, alog.data},
                          {"model.layers.0.norm.weight", norm.shape, norm.data}});
  expect_load_error({path, "'model.layers.0.mamba.A_log.0'", "[8,16,1]"});

  // Wrong dtype: the embedding stored as I64 (8 bytes per element).
  write_raw(path, build_file(R"({"model.embed_tokens.weight":{"dtype":"I64","shape":[10,4],"data_offsets":[0,320]}})",
                             std::string(320, '\0')));
  expect_load_error({path, "'model.embed_tokens.weight'", "dtype I64"});

  // A valid file cut at every kind of place, and corrupted in its header.
  save_params(path, src, {{"note", "x"}});
  const std::string good = read_file(path);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(good[static_cast<size_t>(i)]);
  const size_t cuts[] = {
      0, 3, 7, 8, 9, 8 + n / 2, 8 + n - 1, 8 + n, 8 + n + 1, 8 + n + 100, good.size() - 4, good.size() - 1};
  for (size_t cut : cuts) {
    SCOPED_TRACE("cut at " + std::to_string(cut) + " of " + std::to_string(good.size()));
    ASSERT_LT(cut, good.size());
    write_raw(path, good.substr(0, cut));
    expect_load_error({path});
  }

  std::string corrupt = good;
  corrupt[8 + n / 2] = '}';  // breaks the JSON in the middle
  write_raw(path, corrupt);
  expect_load_error({path, "JSON"});

  corrupt = good;
  corrupt.replace(0, 8, le64(good.size()));  // header length points past EOF
  write_raw(path, corrupt);
  expect_load_error({path, "past the end of the file"});

  write_raw(path, good);
  load_params(path, dst);  // the intact file still loads
  EXPECT_EQ(values_of(dst), values_of(src));
}

// Random corruption of a valid file: every outcome is either a clean read or
// one hymba::Error, never a crash, another exception type or an overread
// (the sanitizer build checks the last).
TEST(Safetensors, CorruptedFilesFailCleanly) {
  TempDir dir;
  const std::string path = dir.file("fuzz.safetensors");
  ParamTable src = make_table();
  src.init(Rng(4));
  save_params(path, src, {{"k", "v"}});
  const std::string good = read_file(path);
  Rng rng(9);
  int errors = 0;
  for (int iter = 0; iter < 300; ++iter) {
    std::string bad = good;
    const int flips = 1 + static_cast<int>(rng.below(4));
    for (int i = 0; i < flips; ++i) {
      // Mostly the length and header, where the structure lives.
      const size_t span = rng.below(4) == 0 ? bad.size() : std::min<size_t>(bad.size(), 300);
      bad[rng.below(span)] = static_cast<char>(rng.below(256));
    }
    if (rng.below(3) == 0) bad.resize(rng.below(bad.size()));
    // A fresh name each time: ext4 flushes a file truncated in place, slowly.
    const std::string name = dir.file("fuzz" + std::to_string(iter) + ".safetensors");
    write_raw(name, bad);
    try {
      SafetensorsFile f = SafetensorsFile::open(name);
      for (const auto& e : f.entries())
        if (e.is_float()) f.read_f32(e.name);
    } catch (const Error& e) {
      ++errors;
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
    }
    fs::remove(name);
  }
  EXPECT_GT(errors, 100);
}

TEST(Safetensors, SaveRejectsBadInput) {
  TempDir dir;
  const std::string path = dir.file("x.safetensors");
  float v = 1.0f;
  expect_error([&] { save_safetensors(path, {{"a", {1}, &v}, {"a", {1}, &v}}); }, {path, "'a'", "twice"});
  expect_error([&] { save_safetensors(path, {{"__metadata__", {1}, &v}}); }, {path, "reserved"});
  expect_error([&] { save_safetensors(path, {{"", {1}, &v}}); }, {path, "empty name"});
  expect_error([&] { save_safetensors(path, {{"a", {1}, nullptr}}); }, {path, "'a'", "no data"});
  expect_error([&] { save_safetensors(path, {{"a", {1}, &v}}, {{"k", "\xff"}}); }, {path, "UTF-8"});
  EXPECT_TRUE(dir.listing().empty());
}

TEST(AtomicFile, FailedWriteKeepsThePreviousFileAndNoTemp) {
  TempDir dir;
  const std::string path = dir.file("config.json");
  write_text_atomic(path, "{\"old\": true}\n");
  EXPECT_EQ(read_file(path), "{\"old\": true}\n");

  EXPECT_THROW(write_file_atomic(path,
                                 [&](std::FILE* f) {
                                   std::fputs("{\"new\": ", f);
                                   std::fflush(f);
                                   throw std::runtime_error("writer died midway");
                                 }),
               std::runtime_error);
  EXPECT_EQ(read_file(path), "{\"old\": true}\n");
  EXPECT_EQ(dir.listing(), std::vector<std::string>{"config.json"});

  // A checkpoint save that fails validation midway behaves the same.
  float v = 1.0f;
  expect_error([&] { save_safetensors(path, {{"a", {1}, &v}, {"b", {1}, nullptr}}); }, {path});
  EXPECT_EQ(read_file(path), "{\"old\": true}\n");

  write_text_atomic(path, "new");
  EXPECT_EQ(read_file(path), "new");
  EXPECT_EQ(dir.listing(), std::vector<std::string>{"config.json"});
}

TEST(AtomicFile, ErrorsNameThePathAndReason) {
  TempDir dir;
  const std::string missing_dir = dir.file("no/such/dir/out.json");
  expect_error([&] { write_text_atomic(missing_dir, "x"); }, {missing_dir, std::strerror(ENOENT)});
  expect_error([&] { read_file(dir.file("absent.json")); }, {dir.file("absent.json"), std::strerror(ENOENT)});
  expect_error([&] { read_file(dir.file("")); }, {"directory"});
  // Renaming over a directory fails after the temp file was written: it is removed.
  fs::create_directory(dir.file("occupied"));
  fs::create_directory(dir.file("occupied/child"));
  expect_error([&] { write_text_atomic(dir.file("occupied"), "x"); }, {dir.file("occupied")});
  EXPECT_EQ(dir.listing(), std::vector<std::string>{"occupied"});
  write_text_atomic(dir.file("empty"), "");
  EXPECT_EQ(read_file(dir.file("empty")), "");
}

}  // namespace
}  // namespace hymba
