// Tests for Tensor views (shape, rows, reshape, byte sizes, including block-quantized dtypes) and the
// aligned, zero-filled host Buffer behind HostTensor.
#include "pagoda/core/tensor.h"

#include <gtest/gtest.h>

#include <cstdint>

#include "pagoda/core/buffer.h"

namespace pagoda {
namespace {

TEST(Tensor, ShapeAndSizes) {
  float data[24] = {};
  const Tensor t(data, DType::kF32, {2, 3, 4});
  EXPECT_EQ(t.ndim, 3);
  EXPECT_EQ(t.dim(0), 2);
  EXPECT_EQ(t.dim(2), 4);
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.nbytes(), 96);
  EXPECT_EQ(t.row_bytes(), 48);
  EXPECT_EQ(t.shape_string(), "[2, 3, 4]");
  EXPECT_FALSE(t.empty());
  EXPECT_TRUE(Tensor().empty());
}

TEST(Tensor, FromSpanMatchesInitializerList) {
  const int64_t dims[] = {5, 7};
  const Tensor t = Tensor::from_span(nullptr, DType::kBF16, dims);
  EXPECT_EQ(t.ndim, 2);
  EXPECT_EQ(t.shape_string(), "[5, 7]");
  EXPECT_EQ(t.nbytes(), 70);
}

TEST(Tensor, QuantizedSizes) {
  const Tensor q8(nullptr, DType::kQ8_0, {4, 64});
  EXPECT_EQ(q8.nbytes(), 4 * 2 * 34);
  EXPECT_EQ(q8.row_bytes(), 2 * 34);
  const Tensor q4(nullptr, DType::kQ4_0, {3, 128});
  EXPECT_EQ(q4.nbytes(), 3 * 4 * 18);
  EXPECT_EQ(q4.row_bytes(), 4 * 18);
}

TEST(Tensor, RowsIsAViewAtTheRightOffset) {
  HostTensor host(DType::kF32, {4, 3});
  float* p = host.ptr<float>();
  for (int i = 0; i < 12; ++i) p[i] = static_cast<float>(i);
  const Tensor middle = host.view().rows(1, 2);
  EXPECT_EQ(middle.shape_string(), "[2, 3]");
  EXPECT_EQ(middle.ptr<float>(), p + 3);
  EXPECT_EQ(middle.ptr<float>()[0], 3.0f);
  EXPECT_EQ(middle.nbytes(), 24);
  EXPECT_EQ(host.view().rows(4, 0).numel(), 0);  // an empty tail is allowed

  const Tensor q(reinterpret_cast<void*>(0x1000), DType::kQ8_0, {3, 32});
  EXPECT_EQ(q.rows(2, 1).data, reinterpret_cast<void*>(0x1000 + 2 * 34));
}

TEST(Tensor, ReshapeKeepsStorage) {
  HostTensor host(DType::kF16, {2, 6});
  const Tensor r = host.view().reshape({3, 2, 2});
  EXPECT_EQ(r.data, host.view().data);
  EXPECT_EQ(r.dtype, DType::kF16);
  EXPECT_EQ(r.shape_string(), "[3, 2, 2]");
  EXPECT_EQ(r.nbytes(), host.view().nbytes());
  EXPECT_EQ(host.view().reshape({12}).row_bytes(), 2);  // a 1-d row is one element
}

TEST(TensorDeathTest, BadViewsAbort) {
  float data[6] = {};
  const Tensor t(data, DType::kF32, {2, 3});
  EXPECT_DEATH(t.reshape({4, 2}), "reshape");
  EXPECT_DEATH(t.rows(1, 2), "rows");
  EXPECT_DEATH(t.dim(2), "dim");
}

TEST(Buffer, AlignedAndZeroed) {
  Buffer b(100);
  EXPECT_EQ(b.size(), 100u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % 64, 0u);
  const auto* bytes = static_cast<const uint8_t*>(b.data());
  for (int i = 0; i < 100; ++i) ASSERT_EQ(bytes[i], 0) << i;
  Buffer empty(0);
  EXPECT_NE(empty.data(), nullptr);
}

// Weights in huge pages: 2 MiB aligned where rounding up to 2 MiB adds at most an eighth; a small tensor (a
// layer norm) keeps the plain alignment instead of taking 2 MiB; kZeroHugePages is zeroed either way.
TEST(Buffer, HugePagesOnlyWhereTheRoundingIsSmall) {
  constexpr size_t kHuge = size_t{2} << 20;
  const auto address = [](const Buffer& b) { return reinterpret_cast<uintptr_t>(b.data()); };
  const Buffer large(3 * kHuge - 4096, Buffer::Init::kZeroHugePages);  // rounds up by 4 KiB
  EXPECT_EQ(address(large) % kHuge, 0u);
  EXPECT_EQ(large.size(), 3 * kHuge - 4096);
  const auto* bytes = static_cast<const unsigned char*>(large.data());
  for (size_t i = 0; i < large.size(); i += 4093) ASSERT_EQ(bytes[i], 0) << i;
  EXPECT_EQ(bytes[large.size() - 1], 0);
  const Buffer exact(kHuge, Buffer::Init::kHugePages);
  EXPECT_EQ(address(exact) % kHuge, 0u);
  EXPECT_TRUE(Buffer::huge_pages_worth(kHuge));
  EXPECT_TRUE(Buffer::huge_pages_worth(8 * kHuge + 1));       // rounds up by almost 2 MiB: under an eighth of 16
  EXPECT_FALSE(Buffer::huge_pages_worth(kHuge + 1));          // would take 4 MiB for 2
  EXPECT_FALSE(Buffer::huge_pages_worth(kHuge - kHuge / 8 - 1));  // 2 MiB for a bit under 1.75
  EXPECT_FALSE(Buffer::huge_pages_worth(8192));               // a layer norm: 2 MiB for 8 KiB
  EXPECT_FALSE(Buffer::huge_pages_worth(0));
  // Not worth it: plain 64-byte alignment, still zeroed.
  const Buffer small(8192, Buffer::Init::kZeroHugePages);
  EXPECT_EQ(address(small) % 64, 0u);
  const auto* small_bytes = static_cast<const unsigned char*>(small.data());
  for (size_t i = 0; i < small.size(); ++i) ASSERT_EQ(small_bytes[i], 0) << i;
}

TEST(HostTensor, OwnsEnoughStorage) {
  HostTensor q(DType::kQ4_0, {2, 64});
  EXPECT_EQ(q.view().nbytes(), 2 * 2 * 18);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(q.view().data) % 64, 0u);
}

}  // namespace
}  // namespace pagoda
