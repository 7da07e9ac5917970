// GgufFile: parsing of the bundled GGUF files, every value type, and rejection of malformed files.
#include "pagoda/loader/gguf_file.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "test_files.h"

namespace pagoda {
namespace {

using test::GgufWriter;
using test::TempDir;

TEST(GgufFile, ParsesStories260K) {
  GgufFile f(test::stories_gguf());
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.get_int("llama.embedding_length"), 64);
  EXPECT_EQ(f.get_int("llama.block_count"), 5);
  EXPECT_EQ(f.get_int("llama.attention.head_count"), 8);
  EXPECT_EQ(f.get_int("llama.attention.head_count_kv"), 4);
  EXPECT_EQ(f.get_string("tokenizer.ggml.model"), "llama");
  const auto tokens = f.get_strings("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens.has_value());
  EXPECT_EQ(tokens->size(), 512u);
  EXPECT_EQ((*tokens)[0], "<unk>");
  const auto scores = f.get_floats("tokenizer.ggml.scores");
  ASSERT_TRUE(scores.has_value());
  EXPECT_EQ(scores->size(), 512u);
  const auto types = f.get_ints("tokenizer.ggml.token_type");
  ASSERT_TRUE(types.has_value());
  EXPECT_EQ(types->size(), 512u);

  EXPECT_EQ(f.tensors().size(), 48u);  // 5 layers x 9 + token_embd + output_norm + output
  const GgufTensorInfo* embd = f.find_tensor("token_embd.weight");
  ASSERT_NE(embd, nullptr);
  EXPECT_EQ(embd->dtype, DType::kF32);
  EXPECT_EQ(embd->shape, (std::vector<int64_t>{512, 64}));
  EXPECT_EQ(embd->nbytes, 512u * 64u * 4u);
  const GgufTensorInfo* wk = f.find_tensor("blk.0.attn_k.weight");
  ASSERT_NE(wk, nullptr);
  EXPECT_EQ(wk->shape, (std::vector<int64_t>{32, 64}));  // 4 kv heads x head_dim 8
  EXPECT_EQ(f.find_tensor("nope"), nullptr);
  // Tensor data is inside the mapping and aligned.
  for (const auto& t : f.tensors()) {
    EXPECT_GE(t.data, f.mapping()->data());
    EXPECT_LE(t.data + t.nbytes, f.mapping()->data() + f.mapping()->size());
    EXPECT_EQ((t.data - f.mapping()->data()) % 32, 0) << t.name;
  }
}

TEST(GgufFile, ParsesVocabOnlyFile) {
  GgufFile f(test::data_dir() + "/tokenizers/ggml-vocab-llama-spm.gguf");
  EXPECT_TRUE(f.tensors().empty());
  EXPECT_EQ(f.get_string("tokenizer.ggml.model"), "llama");
  EXPECT_EQ(f.get_strings("tokenizer.ggml.tokens")->size(), 32000u);
}

TEST(GgufFile, AllValueTypesAndNestedArrays) {
  TempDir dir;
  GgufWriter w;
  w.kv_raw("u8", 0, [](test::ByteWriter& b) { b.put<uint8_t>(200); });
  w.kv_raw("i8", 1, [](test::ByteWriter& b) { b.put<int8_t>(-5); });
  w.kv_raw("u16", 2, [](test::ByteWriter& b) { b.put<uint16_t>(60000); });
  w.kv_raw("i16", 3, [](test::ByteWriter& b) { b.put<int16_t>(-300); });
  w.kv_u32("u32", 4000000000u);
  w.kv_i32("i32", -70000);
  w.kv_f32("f32", 1.5f);
  w.kv_bool("bool", true);
  w.kv_str("str", "héllo");
  w.kv_u64("u64", 1ull << 40);
  w.kv_raw("i64", 11, [](test::ByteWriter& b) { b.put<int64_t>(-(1ll << 40)); });
  w.kv_raw("f64", 12, [](test::ByteWriter& b) { b.put<double>(0.125); });
  w.kv_raw("nested", 9, [](test::ByteWriter& b) {  // [[1, 2], [3]] of i32
    b.put<uint32_t>(9);
    b.put<uint64_t>(2);
    b.put<uint32_t>(5); b.put<uint64_t>(2); b.put<int32_t>(1); b.put<int32_t>(2);
    b.put<uint32_t>(5); b.put<uint64_t>(1); b.put<int32_t>(3);
  });
  w.kv_raw("f32s", 9, [](test::ByteWriter& b) {
    b.put<uint32_t>(6); b.put<uint64_t>(2); b.put<float>(0.5f); b.put<float>(-2.0f);
  });
  w.write(dir.file("types.gguf"));

  GgufFile f(dir.file("types.gguf"));
  EXPECT_EQ(f.get_int("u8"), 200);
  EXPECT_EQ(f.get_int("i8"), -5);
  EXPECT_EQ(f.get_int("u16"), 60000);
  EXPECT_EQ(f.get_int("i16"), -300);
  EXPECT_EQ(f.get_int("u32"), 4000000000ll);
  EXPECT_EQ(f.get_int("i32"), -70000);
  EXPECT_EQ(f.get_float("f32"), 1.5);
  EXPECT_EQ(f.get_float("i32"), -70000.0);  // integers widen to float
  EXPECT_EQ(f.get_bool("bool"), true);
  EXPECT_EQ(f.get_string("str"), "héllo");
  EXPECT_EQ(f.get_int("u64"), 1ll << 40);
  EXPECT_EQ(f.get_int("i64"), -(1ll << 40));
  EXPECT_EQ(f.get_float("f64"), 0.125);
  EXPECT_EQ(f.get_floats("f32s"), (std::vector<double>{0.5, -2.0}));
  EXPECT_FALSE(f.get_int("absent").has_value());

  const GgufValue* nested = f.find("nested");
  ASSERT_NE(nested, nullptr);
  const auto& outer = std::get<std::shared_ptr<GgufArray>>(*nested)->values;
  ASSERT_EQ(outer.size(), 2u);
  const auto& a0 = std::get<std::shared_ptr<GgufArray>>(outer[0])->values;
  const auto& a1 = std::get<std::shared_ptr<GgufArray>>(outer[1])->values;
  ASSERT_EQ(a0.size(), 2u);
  EXPECT_EQ(std::get<int64_t>(a0[1]), 2);
  ASSERT_EQ(a1.size(), 1u);
  EXPECT_EQ(std::get<int64_t>(a1[0]), 3);

  // Type mismatches are LoadErrors naming the key.
  test::expect_load_error([&] { f.get_int("str"); }, {"types.gguf", "str", "expected an integer"});
  test::expect_load_error([&] { f.get_string("u8"); }, {"u8", "expected a string"});
  test::expect_load_error([&] { f.get_strings("f32s"); }, {"f32s", "expected strings"});
}

TEST(GgufFile, V2AndCustomAlignment) {
  TempDir dir;
  GgufWriter w;
  w.version = 2;
  w.alignment = 64;
  w.kv_u32("general.alignment", 64);
  std::vector<float> a = {1, 2, 3}, b = {4, 5, 6, 7};
  w.tensor("a", 0, {3}, test::to_bytes(a));
  w.tensor("b", 0, {2, 2}, test::to_bytes(b));
  w.write(dir.file("v2.gguf"));
  GgufFile f(dir.file("v2.gguf"));
  EXPECT_EQ(f.version(), 2u);
  const GgufTensorInfo* tb = f.find_tensor("b");
  ASSERT_NE(tb, nullptr);
  EXPECT_EQ((tb->data - f.mapping()->data()) % 64, 0);
  EXPECT_EQ(reinterpret_cast<const float*>(tb->data)[3], 7.0f);
  EXPECT_EQ(reinterpret_cast<const float*>(f.find_tensor("a")->data)[2], 3.0f);
}

TEST(GgufFile, QuantizedTensorSizes) {
  TempDir dir;
  GgufWriter w;
  w.tensor("q8", 8, {2, 64}, std::vector<uint8_t>(2 * 2 * 34, 0));
  w.tensor("q4", 2, {3, 32}, std::vector<uint8_t>(3 * 18, 0));
  w.tensor("bf", 30, {4}, std::vector<uint8_t>(8, 0));
  w.tensor("h", 1, {4}, std::vector<uint8_t>(8, 0));
  w.write(dir.file("q.gguf"));
  GgufFile f(dir.file("q.gguf"));
  EXPECT_EQ(f.find_tensor("q8")->dtype, DType::kQ8_0);
  EXPECT_EQ(f.find_tensor("q8")->nbytes, 136u);
  EXPECT_EQ(f.find_tensor("q4")->dtype, DType::kQ4_0);
  EXPECT_EQ(f.find_tensor("q4")->nbytes, 54u);
  EXPECT_EQ(f.find_tensor("bf")->dtype, DType::kBF16);
  EXPECT_EQ(f.find_tensor("h")->dtype, DType::kF16);
}

// The llama.cpp block types converted at load: sizes from ggml-common.h's block structs; no Pagoda dtype.
TEST(GgufFile, BlockTypeSizes) {
  TempDir dir;
  GgufWriter w;
  const struct { const char* name; uint32_t type; uint64_t row, block_bytes, block_elems; } kinds[] = {
      {"q4_1", 3, 64, 20, 32},    {"q5_0", 6, 64, 22, 32},    {"q5_1", 7, 96, 24, 32},
      {"q4_k", 12, 512, 144, 256}, {"q5_k", 13, 256, 176, 256}, {"q6_k", 14, 768, 210, 256},
  };
  for (const auto& k : kinds)
    w.tensor(k.name, k.type, {2, k.row}, std::vector<uint8_t>(2 * k.row / k.block_elems * k.block_bytes, 0));
  w.write(dir.file("blocks.gguf"));
  GgufFile f(dir.file("blocks.gguf"));
  for (const auto& k : kinds) {
    const GgufTensorInfo* t = f.find_tensor(k.name);
    ASSERT_NE(t, nullptr) << k.name;
    EXPECT_EQ(static_cast<uint32_t>(t->type), k.type);
    EXPECT_EQ(t->dtype, DType::kU8) << k.name;
    EXPECT_EQ(t->nbytes, 2 * k.row / k.block_elems * k.block_bytes) << k.name;
    EXPECT_EQ(t->shape, (std::vector<int64_t>{2, static_cast<int64_t>(k.row)}));
  }
  EXPECT_EQ(f.find_tensor("q4_k")->type, GgmlType::kQ4_K);
}

// ---- malformed files ----

TEST(GgufFileErrors, BadMagic) {
  TempDir dir;
  GgufWriter w;
  w.magic = 0x12345678;
  w.write(dir.file("bad.gguf"));
  test::expect_load_error([&] { GgufFile f(dir.file("bad.gguf")); }, {"bad.gguf", "bad magic"});
}

TEST(GgufFileErrors, Version1Rejected) {
  TempDir dir;
  GgufWriter w;
  w.version = 1;
  w.write(dir.file("v1.gguf"));
  test::expect_load_error([&] { GgufFile f(dir.file("v1.gguf")); }, {"v1.gguf", "version 1"});
}

TEST(GgufFileErrors, TruncatedInMetadata) {
  TempDir dir;
  GgufWriter w;
  w.kv_str("general.name", "a fairly long model name string");
  w.kv_u32("llama.block_count", 5);
  auto bytes = w.build();
  bytes.resize(40);  // cuts through the first string value
  test::write_bytes(dir.file("trunc.gguf"), bytes);
  test::expect_load_error([&] { GgufFile f(dir.file("trunc.gguf")); }, {"trunc.gguf", "truncated"});
  // Every prefix of a valid file fails cleanly.
  const auto full = GgufFile(test::stories_gguf()).mapping();
  std::vector<uint8_t> all(reinterpret_cast<const uint8_t*>(full->data()),
                           reinterpret_cast<const uint8_t*>(full->data()) + 20000);
  for (size_t n = 0; n < all.size(); n += 97) {
    test::write_bytes(dir.file("prefix.gguf"), std::vector<uint8_t>(all.begin(), all.begin() + n));
    EXPECT_THROW(GgufFile f(dir.file("prefix.gguf")), LoadError) << n;
  }
}

TEST(GgufFileErrors, AbsurdCountsAndLengths) {
  TempDir dir;
  {
    GgufWriter w;
    w.kv_raw("huge", 9, [](test::ByteWriter& b) { b.put<uint32_t>(8); b.put<uint64_t>(1ull << 60); });
    w.write(dir.file("huge_array.gguf"));
    test::expect_load_error([&] { GgufFile f(dir.file("huge_array.gguf")); }, {"huge_array.gguf", "huge"});
  }
  {
    GgufWriter w;
    w.kv_raw("s", 8, [](test::ByteWriter& b) { b.put<uint64_t>(~0ull); });
    w.write(dir.file("huge_string.gguf"));
    test::expect_load_error([&] { GgufFile f(dir.file("huge_string.gguf")); }, {"huge_string.gguf", "truncated"});
  }
  {
    test::ByteWriter b;
    b.put<uint32_t>(0x46554747); b.put<uint32_t>(3); b.put<uint64_t>(~0ull); b.put<uint64_t>(0);
    test::write_bytes(dir.file("many_tensors.gguf"), b.bytes);
    test::expect_load_error([&] { GgufFile f(dir.file("many_tensors.gguf")); }, {"many_tensors.gguf", "tensor count"});
  }
  {
    GgufWriter w;
    w.kv_raw("t", 77, [](test::ByteWriter& b) { b.put<uint32_t>(0); });
    w.write(dir.file("bad_type.gguf"));
    test::expect_load_error([&] { GgufFile f(dir.file("bad_type.gguf")); }, {"bad_type.gguf", "unknown value type 77"});
  }
}

// Metadata costs ~40 bytes in memory a value however small it is on disk: a file may hold 2^22 array elements in all
// (about four times the largest vocabulary's), nested arrays' and every key's together. 16.7M empty nested arrays
// in one 200 MB key took 1.65 GB to parse.
TEST(GgufFileErrors, MetadataValuesAreBoundedAcrossTheFile) {
  TempDir dir;
  constexpr uint64_t kHalf = (uint64_t{1} << 21) + 1;
  const auto u8_array = [](uint64_t n) {
    return [n](test::ByteWriter& b) {
      b.put<uint32_t>(0);
      b.put<uint64_t>(n);
      for (uint64_t i = 0; i < n; ++i) b.put<uint8_t>(0);
    };
  };
  {
    GgufWriter w;
    w.kv_raw("first", 9, u8_array(kHalf));
    w.kv_raw("second", 9, u8_array(kHalf));
    w.write(dir.file("two_keys.gguf"));
    test::expect_load_error([&] { GgufFile f(dir.file("two_keys.gguf")); },
                            {"two_keys.gguf", "metadata second", "array elements a file may hold"});
  }
  {
    GgufWriter w;
    w.kv_raw("nested", 9, [&](test::ByteWriter& b) {  // arrays of one empty array each, 2 x kHalf elements in all
      b.put<uint32_t>(9);
      b.put<uint64_t>(kHalf);
      for (uint64_t i = 0; i < kHalf; ++i) {
        b.put<uint32_t>(9);
        b.put<uint64_t>(1);
        b.put<uint32_t>(0);
        b.put<uint64_t>(0);
      }
    });
    w.write(dir.file("nested.gguf"));
    test::expect_load_error([&] { GgufFile f(dir.file("nested.gguf")); },
                            {"nested.gguf", "metadata nested", "array elements a file may hold"});
  }
  {
    GgufWriter w;
    w.kv_raw("first", 9, u8_array(kHalf));
    w.kv_raw("second", 9, u8_array(kHalf - 4));
    w.write(dir.file("within.gguf"));
    GgufFile f(dir.file("within.gguf"));
    EXPECT_EQ(f.get_ints("second")->size(), kHalf - 4);
  }
}

TEST(GgufFileErrors, TensorOutsideFile) {
  TempDir dir;
  GgufWriter w;
  w.tensor("blk.0.attn_q.weight", 0, {4, 4}, std::vector<uint8_t>(64, 0));
  w.override_last_offset(1ull << 20);
  w.write(dir.file("outside.gguf"));
  test::expect_load_error([&] { GgufFile f(dir.file("outside.gguf")); },
                          {"outside.gguf", "blk.0.attn_q.weight", "outside the file"});
  // Data cut short: the directory is fine but the last tensor's bytes are missing.
  GgufWriter w2;
  w2.tensor("x", 0, {64}, std::vector<uint8_t>(256, 0));
  auto bytes = w2.build();
  bytes.resize(bytes.size() - 100);
  test::write_bytes(dir.file("short.gguf"), bytes);
  test::expect_load_error([&] { GgufFile f(dir.file("short.gguf")); }, {"short.gguf", "tensor x", "outside the file"});
}

TEST(GgufFileErrors, UnsupportedTensorType) {
  TempDir dir;
  GgufWriter w;
  w.tensor("blk.3.ffn_down.weight", 99, {256}, std::vector<uint8_t>(144, 0));
  w.write(dir.file("t99.gguf"));
  test::expect_load_error([&] { GgufFile f(dir.file("t99.gguf")); },
                          {"t99.gguf", "blk.3.ffn_down.weight", "unsupported GGML type 99", "Q4_K", "Q6_K"});
  // Types ggml has and Pagoda does not load are named.
  for (const auto& [type, name] : {std::pair{10u, "Q2_K"}, {11u, "Q3_K"}, {20u, "IQ4_NL"}, {9u, "Q8_1"}}) {
    GgufWriter w2;
    w2.tensor("blk.0.attn_q.weight", type, {256}, std::vector<uint8_t>(256, 0));
    w2.write(dir.file("k.gguf"));
    test::expect_load_error([&] { GgufFile f(dir.file("k.gguf")); },
                            {"k.gguf", "blk.0.attn_q.weight", fmt::format("GGML type {} ({})", name, type),
                             "does not load"});
  }
}

TEST(GgufFileErrors, RowNotWholeBlocks) {
  TempDir dir;
  // Real files store rows that are not a multiple of 256 as Q5_0 / Q8_0: a k-quant row of 96 is corrupt.
  const struct { uint32_t type; uint64_t row; const char* expect; } cases[] = {
      {12, 96, "Q4_K block size 256"}, {13, 288, "Q5_K block size 256"}, {14, 128, "Q6_K block size 256"},
      {6, 48, "Q5_0 block size 32"},   {3, 16, "Q4_1 block size 32"},
  };
  for (const auto& c : cases) {
    GgufWriter w;
    w.tensor("blk.1.ffn_up.weight", c.type, {4, c.row}, std::vector<uint8_t>(4096, 0));
    w.write(dir.file("rows.gguf"));
    test::expect_load_error([&] { GgufFile f(dir.file("rows.gguf")); },
                            {"rows.gguf", "blk.1.ffn_up.weight", "row length", c.expect});
  }
}

// A tensor whose type or shape claims more bytes than the writer laid out runs into the next tensor.
TEST(GgufFileErrors, TensorBytesOverlapTheNext) {
  TempDir dir;
  GgufWriter w;
  w.tensor("a", 12, {1, 256}, std::vector<uint8_t>(144, 0));  // Q4_K: 144 bytes
  w.tensor("b", 0, {8}, std::vector<uint8_t>(32, 0));
  w.override_last_offset(128);  // b starts inside a
  w.write(dir.file("overlap.gguf"));
  test::expect_load_error([&] { GgufFile f(dir.file("overlap.gguf")); },
                          {"overlap.gguf", "tensor a", "144 bytes", "Q4_K", "run into tensor b"});
}

// A tensor whose type was changed to one with smaller blocks still fits its bytes, and decoded garbage (found by a
// corrupted-checkpoint sweep: Q6_K -> Q4_K took perplexity from 164 to inf). The gap it leaves is an error, as in
// llama.cpp, and so is a first tensor that does not start the data.
TEST(GgufFileErrors, TensorBytesLeaveAGapBeforeTheNext) {
  TempDir dir;
  GgufWriter w;
  w.tensor("a", 12, {1, 256}, std::vector<uint8_t>(210, 0));  // Q6_K's 210 bytes, labelled Q4_K (144)
  w.tensor("b", 0, {8}, std::vector<uint8_t>(32, 0));
  w.write(dir.file("gap.gguf"));
  test::expect_load_error([&] { GgufFile f(dir.file("gap.gguf")); },
                          {"gap.gguf", "tensor a", "144 bytes", "Q4_K", "end 80 bytes before tensor b"});
}

TEST(GgufFileErrors, DuplicateTensorAndMisalignedOffset) {
  TempDir dir;
  GgufWriter w;
  w.tensor("t", 0, {8}, std::vector<uint8_t>(32, 0));
  w.tensor("t", 0, {8}, std::vector<uint8_t>(32, 0));
  w.write(dir.file("dup.gguf"));
  test::expect_load_error([&] { GgufFile f(dir.file("dup.gguf")); }, {"dup.gguf", "duplicate tensor t"});
  GgufWriter w2;
  w2.tensor("t", 0, {8}, std::vector<uint8_t>(32, 0));
  w2.override_last_offset(4);
  w2.write(dir.file("misaligned.gguf"));
  test::expect_load_error([&] { GgufFile f(dir.file("misaligned.gguf")); }, {"misaligned.gguf", "not aligned"});
}

}  // namespace
}  // namespace pagoda

namespace pagoda {
namespace {

// Random byte corruption of the header and metadata must give a parsed file or a LoadError, never a crash.
TEST(GgufFileErrors, CorruptedBytesNeverCrash) {
  TempDir dir;
  const auto original = test::read_bytes(test::stories_gguf());
  std::mt19937_64 rng(42);
  int errors = 0;
  for (int iter = 0; iter < 300; ++iter) {
    auto bytes = original;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) {
      // Mostly within the metadata/directory (the first ~20 KB), where structure lives.
      const size_t pos = rng() % 20000;
      bytes[pos] = static_cast<uint8_t>(rng());
    }
    test::write_bytes(dir.file("fuzz.gguf"), bytes);
    try {
      GgufFile f(dir.file("fuzz.gguf"));
      for (const auto& t : f.tensors())
        ASSERT_LE(t.data + t.nbytes, f.mapping()->data() + f.mapping()->size()) << t.name;
    } catch (const LoadError& e) {
      ++errors;
      EXPECT_NE(std::string(e.what()).find("fuzz.gguf"), std::string::npos);
    }
  }
  EXPECT_GT(errors, 0);
}

}  // namespace
}  // namespace pagoda
