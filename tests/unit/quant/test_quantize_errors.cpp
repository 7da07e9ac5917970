// Bad input to quantize_checkpoint: each is an Error with a one-line message naming the problem, raised
// before any output is written.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "../loader/test_files.h"
#include "pagoda/core/error.h"
#include "pagoda/quantize/quantize_checkpoint.h"

namespace pagoda {
namespace {

using namespace quantizer;

QuantizeOptions base(const std::string& out) {
  QuantizeOptions o;
  o.model_path = test::data_dir() + "/models/quant/tinystories-656k";
  o.out_dir = out;
  o.show_progress = false;
  return o;
}

void expect_error(const QuantizeOptions& o, const std::string& needle) {
  try {
    quantize_checkpoint(o);
    ADD_FAILURE() << "no error; expected one containing: " << needle;
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(needle), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
}

TEST(QuantizeErrors, Options) {
  test::TempDir tmp;
  QuantizeOptions o = base(tmp.file("out"));
  o.bits = 3;
  expect_error(o, "--bits 3: must be 4 or 8");
  o = base(tmp.file("out"));
  o.method = QuantizeMethod::kAwq;
  o.bits = 8;
  expect_error(o, "--method awq quantizes to 4 bits only");
  o = base(tmp.file("out"));
  o.group_size = 48;
  expect_error(o, "--group-size 48 does not divide in_features 128 of model.layers.0.self_attn.q_proj.weight");
  o = base(tmp.file("out"));
  o.bits = 4;
  o.format = QuantizeFormat::kFp8;
  expect_error(o, "--format fp8 needs --bits 8");
  EXPECT_FALSE(std::filesystem::exists(tmp.file("out")));  // nothing written
}

TEST(QuantizeErrors, Sources) {
  test::TempDir tmp;
  QuantizeOptions o = base(tmp.file("out"));
  o.model_path = tmp.file("missing");
  expect_error(o, "no such model file or directory");
  o.model_path = test::data_dir() + "/models/gguf-kquant/tinystories-656k-Q4_K_M.gguf";
  expect_error(o, "tensor token_embd.weight is Q5_0: only F32, F16 or BF16 GGUF files can be quantized");
  o.model_path = test::data_dir() + "/README.md";
  expect_error(o, "not a model: give an HF safetensors checkpoint directory or a .gguf file");
  o.model_path = test::data_dir() + "/models/quant/awq-w4-g128-gemm";
  expect_error(o, "already quantized");
  o.model_path = tmp.path();
  expect_error(o, "no config.json");
}

TEST(QuantizeErrors, TokenizerDirectory) {
  test::TempDir tmp;
  QuantizeOptions o = base(tmp.file("out"));
  o.tokenizer_dir = tmp.file("missing");
  expect_error(o, "--tokenizer: not a directory");
  o.tokenizer_dir = tmp.path();
  expect_error(o, "--tokenizer: no tokenizer.json in the directory");
  EXPECT_FALSE(std::filesystem::exists(tmp.file("out")));  // checked before anything is written
}

TEST(QuantizeErrors, OutputDirectory) {
  test::TempDir tmp;
  QuantizeOptions o = base(tmp.file("full"));
  std::filesystem::create_directories(tmp.file("full"));
  std::ofstream(tmp.file("full") + "/x") << "x";
  expect_error(o, "directory is not empty (pass --force");
  std::ofstream(tmp.file("plain")) << "x";
  o.out_dir = tmp.file("plain") + "/sub";
  expect_error(o, "cannot create the directory");
  o.out_dir = tmp.file("full");
  o.force = true;
  EXPECT_NO_THROW(quantize_checkpoint(o));
}

}  // namespace
}  // namespace pagoda
