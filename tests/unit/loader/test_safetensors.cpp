// SafetensorsCheckpoint: the bundled single-file checkpoints, sharded checkpoints written by the test, and
// rejection of malformed files.
#include "pagoda/loader/safetensors.h"

#include <gtest/gtest.h>

#include "test_files.h"

namespace pagoda {
namespace {

using nlohmann::json;
using test::SafetensorsWriter;
using test::TempDir;

TEST(Safetensors, TinyLlama3SingleFile) {
  const std::string dir = test::data_dir() + "/models/tiny-llama3-hf";
  const auto ckpt = SafetensorsCheckpoint::open(dir);
  EXPECT_EQ(ckpt.tensors().size(), 20u);  // embed + 2 x 9 + norm (tied: no lm_head)
  EXPECT_EQ(ckpt.mappings().size(), 1u);
  const SafetensorsTensor* e = ckpt.find("model.embed_tokens.weight");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->dtype, DType::kBF16);
  EXPECT_EQ(e->shape, (std::vector<int64_t>{128256, 64}));
  EXPECT_EQ(e->nbytes, 128256u * 64u * 2u);
  EXPECT_EQ(ckpt.find("lm_head.weight"), nullptr);
  // The view is the raw bytes at 8 + header_len + begin.
  const auto raw = test::read_bytes(dir + "/model.safetensors");
  uint64_t header_len = 0;
  std::memcpy(&header_len, raw.data(), 8);
  const json header = json::parse(raw.begin() + 8, raw.begin() + 8 + static_cast<long>(header_len));
  const auto& q = header["model.layers.1.self_attn.q_proj.weight"];
  const uint64_t begin = q["data_offsets"][0];
  const SafetensorsTensor* tq = ckpt.find("model.layers.1.self_attn.q_proj.weight");
  ASSERT_NE(tq, nullptr);
  EXPECT_EQ(std::memcmp(tq->data, raw.data() + 8 + header_len + begin, tq->nbytes), 0);
  EXPECT_EQ(tq->file, dir + "/model.safetensors");
}

TEST(Safetensors, OpenOneFileDirectly) {
  TempDir dir;
  SafetensorsWriter w;
  std::vector<float> a = {1.f, 2.f, 3.f, 4.f, 5.f, 6.f};
  w.tensor("a", "F32", {2, 3}, test::to_bytes(a));
  w.tensor("b", "F16", {2}, {0x00, 0x3c, 0x00, 0xc0});  // 1.0, -2.0
  w.tensor("c", "BF16", {1}, {0x80, 0x3f});              // 1.0
  w.write(dir.file("x.safetensors"));
  const auto ckpt = SafetensorsCheckpoint::open(dir.file("x.safetensors"));
  EXPECT_EQ(ckpt.tensors().size(), 3u);
  float a5;
  std::memcpy(&a5, ckpt.find("a")->data + 5 * 4, 4);
  EXPECT_EQ(a5, 6.f);
  EXPECT_EQ(ckpt.find("b")->dtype, DType::kF16);
  EXPECT_EQ(f16_to_f32(reinterpret_cast<const uint16_t*>(ckpt.find("b")->data)[1]), -2.f);
  EXPECT_EQ(ckpt.find("c")->dtype, DType::kBF16);
}

TEST(Safetensors, ShardedCheckpoint) {
  TempDir dir;
  SafetensorsWriter s1, s2;
  s1.tensor("x", "F32", {2}, test::to_bytes(std::vector<float>{1, 2}));
  s1.tensor("y", "F32", {1}, test::to_bytes(std::vector<float>{3}));
  s2.tensor("z", "BF16", {2, 2}, std::vector<uint8_t>(8, 0));
  s1.write(dir.file("model-00001-of-00002.safetensors"));
  s2.write(dir.file("model-00002-of-00002.safetensors"));
  const json index = {{"metadata", {{"total_size", 20}}},
                      {"weight_map",
                       {{"x", "model-00001-of-00002.safetensors"},
                        {"y", "model-00001-of-00002.safetensors"},
                        {"z", "model-00002-of-00002.safetensors"}}}};
  test::write_text(dir.file("model.safetensors.index.json"), index.dump());
  const auto ckpt = SafetensorsCheckpoint::open(dir.path());
  EXPECT_EQ(ckpt.tensors().size(), 3u);
  EXPECT_EQ(ckpt.mappings().size(), 2u);
  EXPECT_EQ(reinterpret_cast<const float*>(ckpt.find("y")->data)[0], 3.f);
  EXPECT_EQ(ckpt.find("z")->file, dir.file("model-00002-of-00002.safetensors"));

  // A shard the index names but that is not there.
  std::filesystem::remove(dir.file("model-00002-of-00002.safetensors"));
  test::expect_load_error([&] { SafetensorsCheckpoint::open(dir.path()); },
                          {"model-00002-of-00002.safetensors", "missing shard"});
  // A tensor the index maps to a shard that does not hold it.
  s2.write(dir.file("model-00002-of-00002.safetensors"));
  json bad = index;
  bad["weight_map"]["w"] = "model-00002-of-00002.safetensors";
  test::write_text(dir.file("model.safetensors.index.json"), bad.dump());
  test::expect_load_error([&] { SafetensorsCheckpoint::open(dir.path()); }, {"tensor w", "not in the shard"});
}

TEST(Safetensors, EmptyDirectory) {
  TempDir dir;
  test::expect_load_error([&] { SafetensorsCheckpoint::open(dir.path()); }, {dir.path(), "no model.safetensors"});
}

// ---- malformed files ----

SafetensorsWriter small_writer() {
  SafetensorsWriter w;
  w.tensor("model.norm.weight", "F32", {4}, test::to_bytes(std::vector<float>{1, 2, 3, 4}));
  return w;
}

TEST(SafetensorsErrors, Truncated) {
  TempDir dir;
  auto bytes = small_writer().build();
  bytes.resize(bytes.size() - 3);
  test::write_bytes(dir.file("t.safetensors"), bytes);
  test::expect_load_error([&] { SafetensorsCheckpoint::open(dir.file("t.safetensors")); },
                          {"t.safetensors", "model.norm.weight", "outside the file"});
  test::write_bytes(dir.file("tiny.safetensors"), {1, 2, 3});
  test::expect_load_error([&] { SafetensorsCheckpoint::open(dir.file("tiny.safetensors")); },
                          {"tiny.safetensors", "truncated"});
}

TEST(SafetensorsErrors, BadHeaderJson) {
  TempDir dir;
  test::write_bytes(dir.file("b.safetensors"), small_writer().build_with_header("{\"a\": [1, 2"));
  test::expect_load_error([&] { SafetensorsCheckpoint::open(dir.file("b.safetensors")); },
                          {"b.safetensors", "bad safetensors header JSON"});
  test::write_bytes(dir.file("arr.safetensors"), small_writer().build_with_header("[1, 2]"));
  test::expect_load_error([&] { SafetensorsCheckpoint::open(dir.file("arr.safetensors")); },
                          {"arr.safetensors", "not a JSON object"});
}

TEST(SafetensorsErrors, HeaderLengthBeyondFile) {
  TempDir dir;
  auto bytes = small_writer().build();
  const uint64_t huge = 1ull << 40;
  std::memcpy(bytes.data(), &huge, 8);
  test::write_bytes(dir.file("h.safetensors"), bytes);
  test::expect_load_error([&] { SafetensorsCheckpoint::open(dir.file("h.safetensors")); },
                          {"h.safetensors", "header length", "beyond the end of the file"});
}

TEST(SafetensorsErrors, OffsetsOutsideFile) {
  TempDir dir;
  SafetensorsWriter w = small_writer();
  json h = w.header();
  h["model.norm.weight"]["data_offsets"] = {1000, 1016};
  test::write_bytes(dir.file("o.safetensors"), w.build_with_header(h.dump()));
  test::expect_load_error([&] { SafetensorsCheckpoint::open(dir.file("o.safetensors")); },
                          {"o.safetensors", "model.norm.weight", "outside the file"});
  h["model.norm.weight"]["data_offsets"] = {8, 4};
  test::write_bytes(dir.file("rev.safetensors"), w.build_with_header(h.dump()));
  test::expect_load_error([&] { SafetensorsCheckpoint::open(dir.file("rev.safetensors")); },
                          {"rev.safetensors", "model.norm.weight"});
}

// Found by a corrupted-checkpoint sweep: layer 1's tensors pointing at layer 0's bytes, or a tensor named twice in
// the header (the last entry won), loaded and generated garbage. The tensors must tile the data bytes, as the
// safetensors library requires.
TEST(SafetensorsErrors, TensorsMustTileTheDataBytes) {
  TempDir dir;
  SafetensorsWriter w;
  w.tensor("a", "F32", {4}, test::to_bytes(std::vector<float>{1, 2, 3, 4}));
  w.tensor("b", "F32", {4}, test::to_bytes(std::vector<float>{5, 6, 7, 8}));
  json h = w.header();
  h["b"]["data_offsets"] = {0, 16};  // b reads a's bytes
  test::write_bytes(dir.file("shared.safetensors"), w.build_with_header(h.dump()));
  test::expect_load_error([&] { SafetensorsCheckpoint::open(dir.file("shared.safetensors")); },
                          {"shared.safetensors", "overlap the tensor before it"});
  h = w.header();
  h.erase("a");  // a's bytes are in no tensor: a gap, then b
  test::write_bytes(dir.file("gap.safetensors"), w.build_with_header(h.dump()));
  test::expect_load_error([&] { SafetensorsCheckpoint::open(dir.file("gap.safetensors")); },
                          {"gap.safetensors", "tensor b", "leave a gap"});
  h = w.header();
  h.erase("b");  // b's bytes follow the last tensor
  test::write_bytes(dir.file("tail.safetensors"), w.build_with_header(h.dump()));
  test::expect_load_error([&] { SafetensorsCheckpoint::open(dir.file("tail.safetensors")); },
                          {"tail.safetensors", "ends at byte 16 of the 32"});
  // The same key twice: JSON keeps the last value; the header is refused.
  std::string text = w.header().dump();
  const std::string b_entry = text.substr(text.find("\"b\""));
  text = text.substr(0, text.size() - 1) + "," + b_entry;
  test::write_bytes(dir.file("twice.safetensors"), w.build_with_header(text));
  test::expect_load_error([&] { SafetensorsCheckpoint::open(dir.file("twice.safetensors")); },
                          {"twice.safetensors", "tensor b is in the header twice"});
}

TEST(SafetensorsErrors, UnsupportedDtype) {
  TempDir dir;
  for (const std::string dtype : {"BOOL", "F64"}) {
    SafetensorsWriter w;
    w.tensor("model.layers.0.mlp.up_proj.weight", dtype, {1}, std::vector<uint8_t>(dtype == "BOOL" ? 1 : 8, 0));
    w.write(dir.file("d.safetensors"));
    test::expect_load_error([&] { SafetensorsCheckpoint::open(dir.file("d.safetensors")); },
                            {"d.safetensors", "model.layers.0.mlp.up_proj.weight", "unsupported dtype " + dtype});
  }
}

TEST(SafetensorsErrors, ShapeByteSizeMismatch) {
  TempDir dir;
  SafetensorsWriter w = small_writer();
  json h = w.header();
  h["model.norm.weight"]["shape"] = {5};
  test::write_bytes(dir.file("s.safetensors"), w.build_with_header(h.dump()));
  test::expect_load_error([&] { SafetensorsCheckpoint::open(dir.file("s.safetensors")); },
                          {"s.safetensors", "model.norm.weight", "span 16 bytes", "needs 20"});
  h["model.norm.weight"]["shape"] = {-4};
  test::write_bytes(dir.file("neg.safetensors"), w.build_with_header(h.dump()));
  test::expect_load_error([&] { SafetensorsCheckpoint::open(dir.file("neg.safetensors")); },
                          {"neg.safetensors", "model.norm.weight", "non-negative"});
}

}  // namespace
}  // namespace pagoda

namespace pagoda {
namespace {

// Random corruption of the header bytes must give a parsed file or a LoadError, never a crash.
TEST(SafetensorsErrors, CorruptedHeaderNeverCrashes) {
  TempDir dir;
  const auto original = small_writer().build();
  std::mt19937_64 rng(7);
  for (int iter = 0; iter < 500; ++iter) {
    auto bytes = original;
    const size_t header_end = bytes.size() - 16;
    for (int k = 0; k < 2; ++k) bytes[rng() % header_end] = static_cast<uint8_t>(rng());
    test::write_bytes(dir.file("fuzz.safetensors"), bytes);
    try {
      const auto ckpt = SafetensorsCheckpoint::open(dir.file("fuzz.safetensors"));
      for (const auto& [name, t] : ckpt.tensors())
        ASSERT_LE(t.data + t.nbytes, ckpt.mappings()[0]->data() + ckpt.mappings()[0]->size()) << name;
    } catch (const LoadError& e) {
      EXPECT_NE(std::string(e.what()).find("fuzz.safetensors"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace pagoda
