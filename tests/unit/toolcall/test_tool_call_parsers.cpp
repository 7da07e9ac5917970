// Each tool-call format read whole and streamed: for every way of cutting the text into deltas tried here
// (every fixed delta size, every pair of cut points, random cuts), the streamed content and arguments add up
// to the whole-text result, and each call's first delta carries its id, type and name with arguments "".
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <map>
#include <random>
#include <string>
#include <vector>

#include "pagoda/toolcall/tool_call_parser.h"

namespace pagoda::toolcall {
namespace {

struct Expected {
  std::string content;
  std::vector<std::pair<std::string, std::string>> calls;  // name, arguments
};

struct Streamed {
  std::string content;
  std::vector<std::pair<std::string, std::string>> calls;
  std::vector<std::string> ids;
};

Streamed stream(const ToolCallFormat& format, const std::string& text, const std::vector<size_t>& cuts) {
  ToolCallStream s(format);
  Streamed out;
  const auto take = [&](const std::vector<OutputDelta>& deltas) {
    for (const OutputDelta& d : deltas) {
      if (!d.tool_call) {
        EXPECT_FALSE(d.content.empty());
        out.content += d.content;
        continue;
      }
      const ToolCallDelta& t = *d.tool_call;
      if (t.id) {  // a call's first delta: the next index, with its name and no arguments yet
        EXPECT_EQ(t.index, static_cast<int>(out.calls.size()));
        ASSERT_TRUE(t.name.has_value());
        EXPECT_EQ(t.arguments, "");
        out.calls.emplace_back(*t.name, "");
        out.ids.push_back(*t.id);
      } else {
        ASSERT_LT(t.index, static_cast<int>(out.calls.size()));
        EXPECT_FALSE(t.name.has_value());
        EXPECT_FALSE(t.arguments.empty());
        out.calls[t.index].second += t.arguments;
      }
    }
  };
  size_t begin = 0;
  for (size_t cut : cuts) {
    take(s.push(std::string_view(text).substr(begin, cut - begin)));
    begin = cut;
  }
  take(s.push(std::string_view(text).substr(begin)));
  take(s.finish());
  EXPECT_EQ(s.called(), !out.calls.empty());
  return out;
}

std::string describe(const std::vector<size_t>& cuts) {
  std::string s("cuts:");
  for (size_t c : cuts) {
    s += ' ';
    s += std::to_string(c);
  }
  return s;
}

void check_whole(const ToolCallFormat& format, const std::string& text, const Expected& want) {
  const ParsedOutput whole = parse_tool_calls(format, text);
  EXPECT_EQ(whole.content, want.content) << text;
  ASSERT_EQ(whole.tool_calls.size(), want.calls.size()) << text;
  for (size_t i = 0; i < want.calls.size(); ++i) {
    EXPECT_EQ(whole.tool_calls[i].name, want.calls[i].first);
    EXPECT_EQ(whole.tool_calls[i].arguments, want.calls[i].second);
    const bool cut_short = whole.cut_off && i + 1 == want.calls.size();  // only the last call may be cut off
    EXPECT_EQ(nlohmann::json::accept(whole.tool_calls[i].arguments), !cut_short) << whole.tool_calls[i].arguments;
  }
}

void check_streamed(const ToolCallFormat& format, const std::string& text, const Expected& want,
                    const std::vector<size_t>& cuts) {
  const Streamed s = stream(format, text, cuts);
  EXPECT_EQ(s.content, want.content) << text << " " << describe(cuts);
  EXPECT_EQ(s.calls, want.calls) << text << " " << describe(cuts);
}

// The whole-text result, then streams cut every possible way with up to two cuts, at every fixed delta size,
// and at random.
void check(const ToolCallFormat& format, const std::string& text, const Expected& want) {
  SCOPED_TRACE(text);
  check_whole(format, text, want);
  const size_t n = text.size();
  for (size_t size = 1; size <= n; ++size) {
    std::vector<size_t> cuts;
    for (size_t c = size; c < n; c += size) cuts.push_back(c);
    check_streamed(format, text, want, cuts);
  }
  for (size_t i = 1; i < n; ++i) {
    check_streamed(format, text, want, {i});
    for (size_t j = i + 1; j < n; ++j) check_streamed(format, text, want, {i, j});
  }
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<size_t> cuts;
    for (size_t c = 1; c < n; ++c)
      if (rng() % 4 == 0) cuts.push_back(c);
    check_streamed(format, text, want, cuts);
  }
}

TEST(Llama3JsonFormat, OneCallWithParameters) {
  check(*llama3_json_format(), R"({"name": "get_weather", "parameters": {"city": "Paris", "unit": "celsius"}})",
        {"", {{"get_weather", R"({"city": "Paris", "unit": "celsius"})"}}});
}

TEST(Llama3JsonFormat, PythonTagArgumentsAndBracesInStrings) {
  check(*llama3_json_format(), R"(<|python_tag|>{"name": "f", "arguments": {"a": [1, {"b": "}{]\"x"}], "c": null}})",
        {"", {{"f", R"({"a": [1, {"b": "}{]\"x"}], "c": null})"}}});
}

TEST(Llama3JsonFormat, SeveralCallsSeparatedBySemicolons) {
  check(*llama3_json_format(), R"({"name": "a", "parameters": {}}; {"parameters": {"x": 1.5e3}, "name": "b"})",
        {"", {{"a", "{}"}, {"b", R"({"x": 1.5e3})"}}});
}

TEST(Llama3JsonFormat, LeadingWhitespaceEscapedNameUnicodeAndTrailingText) {
  check(*llama3_json_format(), "\n {\"name\": \"f\\u00e9\", \"parameters\": {\"q\": \"caf\xc3\xa9 \\n\"}} done",
        {"done", {{"f\xc3\xa9", "{\"q\": \"caf\xc3\xa9 \\n\"}"}}});
}

TEST(Llama3JsonFormat, TextIsContent) {
  check(*llama3_json_format(), "Hello, {world}! <|python", {"Hello, {world}! <|python", {}});
  check(*llama3_json_format(), "  The answer is 4.", {"  The answer is 4.", {}});
}

TEST(Llama3JsonFormat, JsonThatIsNotACallIsContent) {
  check(*llama3_json_format(), R"({"answer": 42, "name": "x"})", {R"({"answer": 42, "name": "x"})", {}});
  check(*llama3_json_format(), R"({"name": "f", "parameters": "not an object"})",
        {R"({"name": "f", "parameters": "not an object"})", {}});
  // Malformed inside arguments already begun: whole, it is content; a stream had sent the call by then (as
  // with an output cut off inside a call, below).
  check_whole(*llama3_json_format(), R"({"name": "f", "parameters": {"a": 01}})",
              {R"({"name": "f", "parameters": {"a": 01}})", {}});
}

// An output cut off (max_tokens) inside a call whose arguments had begun is that call with its arguments cut
// short, as OpenAI returns it with finish_reason "length"; cut off before that, it is content.
TEST(Llama3JsonFormat, OutputCutOffInsideACall) {
  check(*llama3_json_format(), R"({"name": "f", "parameters": {"a": 1)", {"", {{"f", R"({"a": 1)"}}});
  EXPECT_TRUE(parse_tool_calls(*llama3_json_format(), R"({"name": "f", "parameters": {"a")").cut_off);
  EXPECT_FALSE(parse_tool_calls(*llama3_json_format(), R"({"name": "f", "parameters": {"a": 1}})").cut_off);
  check(*llama3_json_format(), R"({"name": "f", "param)", {R"({"name": "f", "param)", {}});
  check(*llama3_json_format(), R"({"name": "f", "parameters": {}}; {"name": "g)",
        {R"({"name": "g)", {{"f", "{}"}}});
}

// Ended inside a call by something other than max_tokens (end of sequence, a stop string): the text does not parse,
// so it is content, all of it, whole and streamed, as vLLM's parsers return it (hostile sweep 6: it was a call with
// invalid-JSON arguments and finish_reason "tool_calls").
TEST(ToolCallParser, AnOutputEndedInsideACallOtherwiseThanByLengthIsContent) {
  for (const auto& [format, text] :
       {std::pair{llama3_json_format(), std::string(R"({"name": "f", "parameters": {"a": )")},
        std::pair{hermes_format(), std::string("ok <tool_call>{\"name\": \"f\", \"arguments\": {\"s\": \"ab")}}) {
    SCOPED_TRACE(text);
    EXPECT_EQ(parse_tool_calls(*format, text, /*ended_by_length=*/true).tool_calls.size(), 1u);
    const ParsedOutput whole = parse_tool_calls(*format, text, /*ended_by_length=*/false);
    EXPECT_TRUE(whole.tool_calls.empty());
    EXPECT_EQ(whole.content, text);
    for (size_t cut = 1; cut < text.size(); cut += 7) {
      ToolCallStream s(*format);
      std::vector<OutputDelta> deltas = s.push(text.substr(0, cut));
      for (OutputDelta& d : s.push(text.substr(cut))) deltas.push_back(std::move(d));
      for (OutputDelta& d : s.finish(/*ended_by_length=*/false)) deltas.push_back(std::move(d));
      std::string content;
      for (const OutputDelta& d : deltas) {
        EXPECT_FALSE(d.tool_call.has_value());
        content += d.content;
      }
      EXPECT_EQ(content, text) << "cut at " << cut;
      EXPECT_FALSE(s.called());
    }
  }
  // After a complete call the unfinished one is still returned cut short, whole and streamed alike (a stream has
  // sent the first call by then).
  const std::string two = R"({"name": "f", "parameters": {}}; {"name": "g", "parameters": {"a": )";
  const auto llama3 = llama3_json_format();
  const ParsedOutput whole = parse_tool_calls(*llama3, two, /*ended_by_length=*/false);
  ASSERT_EQ(whole.tool_calls.size(), 2u);
  for (size_t cut = 1; cut < two.size(); cut += 5) {
    ToolCallStream s(*llama3);
    std::vector<OutputDelta> deltas = s.push(two.substr(0, cut));
    for (OutputDelta& d : s.push(two.substr(cut))) deltas.push_back(std::move(d));
    for (OutputDelta& d : s.finish(/*ended_by_length=*/false)) deltas.push_back(std::move(d));
    std::string content, arguments;
    int calls = 0;
    for (const OutputDelta& d : deltas) {
      content += d.content;
      if (d.tool_call) {
        calls += d.tool_call->id ? 1 : 0;
        if (d.tool_call->index == 1) arguments += d.tool_call->arguments;
      }
    }
    EXPECT_EQ(content, whole.content) << "cut at " << cut;
    EXPECT_EQ(calls, 2) << "cut at " << cut;
    EXPECT_EQ(arguments, whole.tool_calls[1].arguments) << "cut at " << cut;
  }
}

TEST(HermesFormat, OneBlock) {
  check(*hermes_format(), "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
        {"", {{"get_weather", R"({"city": "Paris"})"}}});
}

TEST(HermesFormat, ContentBeforeAndBetweenBlocks) {
  check(*hermes_format(),
        "Let me check.\n<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": \"</tool_call>\"}}\n</tool_call>\n"
        "<tool_call>{\"arguments\": {}, \"name\": \"b\"}</tool_call>\n Done.",
        {"Let me check.\nDone.", {{"a", R"({"x": "</tool_call>"})"}, {"b", "{}"}}});
}

TEST(HermesFormat, UnclosedLastBlockCounts) {
  check(*hermes_format(), "<tool_call>{\"name\": \"f\", \"arguments\": {\"n\": 3}}", {"", {{"f", R"({"n": 3})"}}});
}

TEST(HermesFormat, OutputCutOffInsideACall) {
  check(*hermes_format(), "ok <tool_call>{\"name\": \"f\", \"arguments\": {\"s\": \"ab", {"ok ", {{"f", R"({"s": "ab)"}}});
  check(*hermes_format(), "ok <tool_call>{\"name\": \"f\"", {"ok <tool_call>{\"name\": \"f\"", {}});
}

TEST(HermesFormat, TextAndBadBlocksAreContent) {
  check(*hermes_format(), "a < b and <tool", {"a < b and <tool", {}});
  check(*hermes_format(), "<tool_call>not json</tool_call>", {"<tool_call>not json</tool_call>", {}});
  check(*hermes_format(), "x <tool_call>{\"name\": \"f\"}</tool_call>", {"x <tool_call>{\"name\": \"f\"}</tool_call>", {}});
}

// A block that names its call and begins its arguments, then turns out malformed at its end, is content both ways:
// the stream sends a call only once it is settled (it used to send the call, then the text as content too).
TEST(HermesFormat, BlocksMalformedAtTheirEndAreContentStreamedToo) {
  for (const std::string text : {R"(<tool_call>{"name": "f", "arguments": {"a": tru}}</tool_call>)",
                                 R"(<tool_call>{"name": "f", "arguments": {"a": 1}, "name": "g"}</tool_call>)"})
    check(*hermes_format(), text, {text, {}});
  check(*hermes_format(), R"(<tool_call>{"name": "f", "arguments": {}}</tool_call> <tool_call>{"name": "g", "arguments": {"b": nul}}</tool_call>)",
        {R"(<tool_call>{"name": "g", "arguments": {"b": nul}}</tool_call>)", {{"f", "{}"}}});
}

TEST(Llama3JsonFormat, ObjectsMalformedAtTheirEndAreContentStreamedToo) {
  const std::string text = R"({"name": "f", "parameters": {"a": [1, 2}})";
  check(*llama3_json_format(), text, {text, {}});
}

TEST(MistralFormat, ArrayOfCalls) {
  check(*mistral_format(), R"([TOOL_CALLS][{"name": "f", "arguments": {"a": 1}}, {"name": "g", "arguments": {}}])",
        {"", {{"f", R"({"a": 1})"}, {"g", "{}"}}});
}

TEST(MistralFormat, ContentBeforeTheMarker) {
  check(*mistral_format(), R"(Sure. [TOOL_CALLS] [{"name": "f", "arguments": {"s": "[x]"}}])",
        {"Sure. ", {{"f", R"({"s": "[x]"})"}}});
}

TEST(MistralFormat, OutputCutOffInsideTheArray) {
  check(*mistral_format(), R"([TOOL_CALLS][{"name": "f", "arguments": {}}, {"name": "g", "arguments": {"x": [)",
        {"", {{"f", "{}"}, {"g", R"({"x": [)"}}});
}

TEST(MistralFormat, TextAndBadArraysAreContent) {
  check(*mistral_format(), "[TOOL not a marker [", {"[TOOL not a marker [", {}});
  // A complete call, then an element that is not one: the whole array is text, streamed too.
  const std::string later_bad = R"([TOOL_CALLS][{"name": "f", "arguments": {}}, 7])";
  check(*mistral_format(), later_bad, {later_bad, {}});
  check(*mistral_format(), R"([TOOL_CALLS] {"name": "f"})", {R"([TOOL_CALLS] {"name": "f"})", {}});
}

TEST(MistralFormat, IdsAreNineLettersAndDigits) {
  const std::string id = mistral_format()->new_call_id();
  ASSERT_EQ(id.size(), 9u);
  for (char c : id) EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(c))) << id;
  const std::string other = llama3_json_format()->new_call_id();
  EXPECT_TRUE(other.starts_with("chatcmpl-tool-")) << other;
  EXPECT_EQ(other.size(), 14u + 32u);
}

TEST(NamedFunctionFormat, TheOutputIsTheArguments) {
  check(*named_function_format("get_weather"), R"({"city": "Paris"})", {"", {{"get_weather", R"({"city": "Paris"})"}}});
}

TEST(RequiredCallsFormat, ArrayWithParameters) {
  check(*required_calls_format(), R"([{"name": "a", "parameters": {"x": 1}}, {"name": "b", "parameters": {}}])",
        {"", {{"a", R"({"x": 1})"}, {"b", "{}"}}});
  check(*required_calls_format(), "no calls", {"no calls", {}});
  check(*required_calls_format(), R"([{"name": "a", "parameters": {"x": )", {"", {{"a", R"({"x": )"}}});
  check(*required_calls_format(), R"([{"name": "a")", {R"([{"name": "a")", {}});
  // Found by fuzz_tool_calls once it compared streams with whole texts: a later element that is not a call.
  check(*required_calls_format(), R"([{"name": "f", "parameters": {"q": 1}}, 7])",
        {R"([{"name": "f", "parameters": {"q": 1}}, 7])", {}});
}

TEST(ToolCallFormat, ParsersByName) {
  EXPECT_TRUE(is_tool_call_parser("llama3_json"));
  EXPECT_TRUE(is_tool_call_parser("hermes"));
  EXPECT_TRUE(is_tool_call_parser("mistral"));
  EXPECT_FALSE(is_tool_call_parser("pythonic"));
  EXPECT_THROW(make_tool_call_format("pythonic"), std::invalid_argument);
  EXPECT_TRUE(make_tool_call_format("hermes")->needs_special_tokens());
  EXPECT_FALSE(make_tool_call_format("llama3_json")->needs_special_tokens());
}

}  // namespace
}  // namespace pagoda::toolcall
