// The GPU sampler off (no NVML here, or no such device) and on against a stand-in NVML library: gauges,
// history, the thread; the heatmap renderer's binning and output.
#include <gtest/gtest.h>

#include <cmath>
#include <thread>

#include "pagoda/metrics/gpu_sampler.h"
#include "pagoda/metrics/heatmap.h"

namespace pagoda::metrics {
namespace {

double gauge_value(const std::string& text, const std::string& series) {
  const size_t at = text.find(series + " ");
  if (at == std::string::npos) return NAN;
  return std::stod(text.substr(at + series.size() + 1));
}

TEST(GpuSampler, OffWithoutNvml) {
  Registry registry;
  GpuSamplerOptions o;
  o.library = "libpagoda-no-such-nvml.so.1";
  GpuSampler sampler(o, registry, {{"model_name", "m"}});
  EXPECT_FALSE(sampler.enabled());
  EXPECT_EQ(sampler.status().rfind("off: cannot load libpagoda-no-such-nvml.so.1", 0), 0u) << sampler.status();
  EXPECT_FALSE(sampler.sample_once());
  EXPECT_TRUE(sampler.samples_since({}).empty());
  const std::string text = registry.render();
  EXPECT_EQ(gauge_value(text, "pagoda:gpu_sampler_enabled{model_name=\"m\"}"), 0);
  EXPECT_EQ(text.find("pagoda:gpu_utilization_perc"), std::string::npos);
}

TEST(GpuSampler, OffWhenDisabled) {
  Registry registry;
  GpuSamplerOptions o;
  o.library = PAGODA_FAKE_NVML;
  o.interval_ms = 0;
  GpuSampler sampler(o, registry);
  EXPECT_FALSE(sampler.enabled());
  EXPECT_NE(sampler.status().find("disabled"), std::string::npos);
}

TEST(GpuSampler, OffForAMissingDevice) {
  Registry registry;
  GpuSamplerOptions o;
  o.library = PAGODA_FAKE_NVML;
  o.devices = {5};
  GpuSampler sampler(o, registry);
  EXPECT_FALSE(sampler.enabled());
  EXPECT_NE(sampler.status().find("no device 5"), std::string::npos) << sampler.status();
}

TEST(GpuSampler, SamplesAStandInNvml) {
  Registry registry;
  GpuSamplerOptions o;
  o.library = PAGODA_FAKE_NVML;
  o.devices = {0, 1};
  o.interval_ms = 10;
  GpuSampler sampler(o, registry, {{"model_name", "m"}});
  ASSERT_TRUE(sampler.enabled()) << sampler.status();
  EXPECT_EQ(sampler.status(), "on: Fake GPU A (device 0), Fake GPU B (device 1), every 10 ms");
  std::this_thread::sleep_for(std::chrono::milliseconds(120));
  const std::vector<GpuSample> samples = sampler.samples_since({});
  ASSERT_GE(samples.size(), 6u);  // ~12 rounds of 2 devices, allowing for a slow machine
  const GpuSample& a = samples[0].device == 0 ? samples[0] : samples[1];
  EXPECT_DOUBLE_EQ(a.sm_util, 0.75);
  EXPECT_DOUBLE_EQ(a.mem_bw_util, 0.40);
  EXPECT_DOUBLE_EQ(a.memory_used_bytes, 20.0 * (1ull << 30));
  EXPECT_DOUBLE_EQ(a.power_watts, 350.5);
  EXPECT_DOUBLE_EQ(a.power_limit_watts, 700);
  EXPECT_DOUBLE_EQ(a.sm_clock_mhz, 1980);
  const std::string text = registry.render();
  EXPECT_EQ(gauge_value(text, "pagoda:gpu_sampler_enabled{model_name=\"m\"}"), 1);
  EXPECT_DOUBLE_EQ(gauge_value(text, "pagoda:gpu_utilization_perc{model_name=\"m\",gpu=\"0\"}"), 0.75);
  EXPECT_DOUBLE_EQ(gauge_value(text, "pagoda:gpu_utilization_perc{model_name=\"m\",gpu=\"1\"}"), 0.10);
  EXPECT_DOUBLE_EQ(gauge_value(text, "pagoda:gpu_power_watts{model_name=\"m\",gpu=\"1\"}"), 350.5);
  EXPECT_DOUBLE_EQ(gauge_value(text, "pagoda:gpu_sm_clock_mhz{model_name=\"m\",gpu=\"0\"}"), 1980);
  // History is ordered and `since` filters it.
  for (size_t i = 1; i < samples.size(); ++i) EXPECT_GE(samples[i].time, samples[i - 1].time);
  EXPECT_LT(sampler.samples_since(samples[samples.size() / 2].time).size(), samples.size());
}

TEST(GpuSampler, HistoryIsBounded) {
  Registry registry;
  GpuSamplerOptions o;
  o.library = PAGODA_FAKE_NVML;
  o.interval_ms = 10000;  // the thread samples once; the test drives the rest
  o.max_history = 5;
  GpuSampler sampler(o, registry);
  ASSERT_TRUE(sampler.enabled());
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(sampler.sample_once());
  EXPECT_EQ(sampler.samples_since({}).size(), 5u);
}

TEST(Heatmap, SpreadSplitsAcrossBins) {
  TimeBins bins{10.0, 1.0, 4};
  EXPECT_EQ(bins.index(9.99), -1);
  EXPECT_EQ(bins.index(10.0), 0);
  EXPECT_EQ(bins.index(13.5), 3);
  EXPECT_EQ(bins.index(14.0), -1);
  std::vector<double> row(4, 0);
  bins.spread(row, 10.5, 12.5, 4.0);  // half a bin, a whole bin, half a bin
  EXPECT_DOUBLE_EQ(row[0], 1.0);
  EXPECT_DOUBLE_EQ(row[1], 2.0);
  EXPECT_DOUBLE_EQ(row[2], 1.0);
  EXPECT_DOUBLE_EQ(row[3], 0.0);
  bins.spread(row, 13.2, 13.2, 7.0);  // an instant
  EXPECT_DOUBLE_EQ(row[3], 7.0);
}

TEST(Heatmap, RendersSvgAndJson) {
  Heatmap h;
  h.title = "t & <test>";
  h.bin_seconds = 0.5;
  h.num_bins = 3;
  h.panels.push_back(HeatmapPanel{"GPU", "", {HeatmapRow{"SM active", "%", {0, 50, NAN}, 100}}});
  const std::string svg = render_svg(h);
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("t &amp; &lt;test&gt;"), std::string::npos);
  EXPECT_NE(svg.find("no data"), std::string::npos);  // the NaN cell
  EXPECT_NE(svg.find("SM active t=0.500s: 50 %"), std::string::npos);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  const nlohmann::json j = to_json(h);
  EXPECT_EQ(j["num_bins"], 3);
  EXPECT_EQ(j["panels"][0]["rows"][0]["values"][1], 50.0);
  EXPECT_TRUE(j["panels"][0]["rows"][0]["values"][2].is_null());
}

}  // namespace
}  // namespace pagoda::metrics
