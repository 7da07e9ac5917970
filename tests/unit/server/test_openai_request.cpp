// Request parsing: shapes of `prompt`, defaults, and 400s that name the field.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>

#include <filesystem>
#include <fstream>

#include "pagoda/core/error.h"
#include "pagoda/server/api_error.h"
#include "pagoda/server/api_keys.h"
#include "pagoda/server/bad_words.h"
#include "pagoda/server/openai_request.h"
#include "pagoda/server/request_fields.h"

namespace pagoda::server {
namespace {

std::string param_of(const std::string& body, bool chat = false) {
  try {
    chat ? parse_chat_request(body) : parse_completion_request(body);
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    return e.param();
  }
  return "<no error>";
}

TEST(OpenAiRequest, PromptShapes) {
  EXPECT_EQ(parse_completion_request(R"({"prompt": "hi"})").prompts.at(0).text, "hi");
  EXPECT_EQ(parse_completion_request(R"({"prompt": ["a", "b"]})").prompts.size(), 2u);
  auto ids = parse_completion_request(R"({"prompt": [1, 2, 3]})");
  ASSERT_EQ(ids.prompts.size(), 1u);
  EXPECT_EQ(ids.prompts[0].ids, (std::vector<TokenId>{1, 2, 3}));
  EXPECT_EQ(parse_completion_request(R"({"prompt": [[1], [2, 3]]})").prompts.size(), 2u);
}

TEST(OpenAiRequest, Fields) {
  auto r = parse_completion_request(
      R"({"prompt": "x", "max_tokens": 5, "temperature": 0, "top_k": 3, "seed": 7, "n": 2, "stop": "\n",
          "logprobs": 2, "echo": true, "stream": true, "stream_options": {"include_usage": true}})");
  EXPECT_EQ(r.params.max_tokens, 5);
  EXPECT_TRUE(r.max_tokens_given);
  EXPECT_TRUE(r.params.is_greedy());
  EXPECT_EQ(r.params.top_k, 3);
  EXPECT_EQ(r.params.seed, 7u);
  EXPECT_EQ(r.n, 2);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"\n"}));
  EXPECT_EQ(r.top_logprobs, 2);
  EXPECT_TRUE(r.echo && r.stream && r.include_usage);
  auto c = parse_chat_request(
      R"({"messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": 9, "logprobs": true, "top_logprobs": 3})");
  EXPECT_EQ(c.params.max_tokens, 9);
  EXPECT_EQ(c.top_logprobs, 3);
}

TEST(OpenAiRequest, ChatTemplateKwargs) {
  const auto c = parse_chat_request(
      R"({"messages": [{"role": "user", "content": "hi"}], "chat_template_kwargs": {"enable_thinking": false, "b": 1, "a": 2}})");
  EXPECT_EQ(c.chat_options.template_kwargs.dump(), R"({"enable_thinking":false,"b":1,"a":2})");
  EXPECT_TRUE(parse_chat_request(R"({"messages": [{"role": "user", "content": "hi"}]})").chat_options.template_kwargs.empty());
  EXPECT_EQ(param_of(R"({"messages": [{"role": "user", "content": "hi"}], "chat_template_kwargs": [1]})", true),
            "chat_template_kwargs");
  EXPECT_EQ(param_of(R"({"messages": [{"role": "user", "content": "hi"}], "chat_template_kwargs": {"messages": []}})", true),
            "chat_template_kwargs");
}

TEST(OpenAiRequest, LogitBias) {
  const auto r = parse_completion_request(R"({"prompt": "x", "logit_bias": {"7": -100, "3": 2.5}})");
  EXPECT_EQ(r.params.logit_bias, (std::vector<std::pair<TokenId, float>>{{3, 2.5f}, {7, -100.0f}}));
  for (const char* bad : {R"({"prompt": "x", "logit_bias": [1]})", R"({"prompt": "x", "logit_bias": {"a": 1}})",
                          R"({"prompt": "x", "logit_bias": {"-1": 1}})", R"({"prompt": "x", "logit_bias": {"1": 101}})",
                          R"({"prompt": "x", "logit_bias": {"1": "up"}})", R"({"prompt": "x", "logit_bias": {"1": 1, "01": 2}})"})
    EXPECT_EQ(param_of(bad), "logit_bias") << bad;
}

// vLLM's token masks: allowed_token_ids sorted and each once (a non-empty list, as vLLM asks), bad_words kept as
// text for the server to encode (bounded: the sampler compares each with the output's tail at every step).
TEST(OpenAiRequest, AllowedTokenIdsAndBadWords) {
  const auto r = parse_completion_request(R"({"prompt": "x", "allowed_token_ids": [14, 3, 14, 0], "bad_words": [" dog", "big cat"]})");
  EXPECT_EQ(r.allowed_token_ids, (std::vector<TokenId>{0, 3, 14}));
  EXPECT_EQ(r.bad_words, (std::vector<std::string>{" dog", "big cat"}));
  const auto c = parse_chat_request(R"({"messages": [{"role": "user", "content": "hi"}], "allowed_token_ids": [5], "bad_words": null})");
  EXPECT_EQ(c.allowed_token_ids, std::vector<TokenId>{5});
  EXPECT_TRUE(c.bad_words.empty());
  for (const char* bad : {R"([])", R"([-1])", R"([1.5])", R"(["3"])", R"(3)", R"([4294967296])"})
    EXPECT_EQ(param_of(std::string(R"({"prompt": "x", "allowed_token_ids": )") + bad + "}"), "allowed_token_ids") << bad;
  const std::string long_word(server::kMaxBadWordBytes + 1, 'a');
  std::string many = "[";
  for (size_t i = 0; i <= server::kMaxBadWords; ++i) many += std::string(i ? "," : "") + "\"w\"";
  many += "]";
  for (const std::string bad : {std::string(R"(" dog")"), std::string(R"([1])"), std::string(R"([""])"),
                                std::string(R"([" \t "])"), "[\"" + long_word + "\"]", many})
    EXPECT_EQ(param_of(R"({"prompt": "x", "bad_words": )" + bad + "}"), "bad_words") << bad.substr(0, 40);
}

TEST(OpenAiRequest, ContinueFinalMessage) {
  const std::string messages = R"("messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Once"}])";
  const auto c = parse_chat_request("{" + messages + R"(, "continue_final_message": true})");
  EXPECT_TRUE(c.chat_options.continue_final_message);
  EXPECT_FALSE(c.chat_options.add_generation_prompt);  // left out: off with continue_final_message
  EXPECT_TRUE(parse_chat_request("{" + messages + "}").chat_options.add_generation_prompt);
  EXPECT_EQ(param_of("{" + messages + R"(, "continue_final_message": true, "add_generation_prompt": true})", true),
            "continue_final_message");
  EXPECT_EQ(param_of("{" + messages + R"(, "continue_final_message": 1})", true), "continue_final_message");
}

// A chat template's tojson writes a message's keys in the order the client sent them, as transformers
// does with the Python dicts of the same request (not sorted).
TEST(OpenAiRequest, ChatMessagesKeepTheirKeyOrder) {
  const auto c = parse_chat_request(
      R"({"messages": [{"role": "assistant", "content": null, "tool_calls": [{"type": "function",
          "function": {"name": "f", "arguments": {"zeta": 1, "alpha": 2}}}]}]})");
  EXPECT_EQ(c.messages.dump(),
            R"([{"role":"assistant","content":"","tool_calls":[{"type":"function","function":{"name":"f",)"
            R"("arguments":{"zeta":1,"alpha":2}}}]}])");
}

// Text parts joined by newlines (vLLM's string content format); other part types are a 400 naming the part.
TEST(OpenAiRequest, ContentPartsBecomeText) {
  const auto c = parse_chat_request(
      R"({"messages": [{"role": "system", "content": "Be brief."},
                       {"role": "user", "content": [{"type": "text", "text": "hi"}, {"type": "text", "text": "there"}]},
                       {"role": "user", "content": []}]})");
  EXPECT_EQ(c.messages[0]["content"], "Be brief.");
  EXPECT_EQ(c.messages[1]["content"], "hi\nthere");
  EXPECT_EQ(c.messages[2]["content"], "");
  try {
    parse_chat_request(R"({"messages": [{"role": "user", "content": [{"type": "text", "text": "a"},
                          {"type": "image_url", "image_url": {"url": "http://x/y.png"}}]}]})");
    ADD_FAILURE() << "an image part was accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_EQ(e.param(), "messages[0].content[1]");
    EXPECT_NE(std::string(e.what()).find("'image_url'"), std::string::npos) << e.what();
  }
  EXPECT_EQ(param_of(R"({"messages": [{"role": "user", "content": [{"text": "a"}]}]})", true), "messages[0].content[0]");
  EXPECT_EQ(param_of(R"({"messages": [{"role": "user", "content": [{"type": "text"}]}]})", true),
            "messages[0].content[0].text");
  EXPECT_EQ(param_of(R"({"messages": [{"role": "user", "content": ["a"]}]})", true), "messages[0].content[0]");
}

// Features Pagoda lacks are a 400 naming the field when asked for, never dropped; other fields are ignored
// as vLLM ignores them (and logged once).
TEST(OpenAiRequest, MissingFeaturesAreRefusedAndOtherFieldsIgnored) {
  const char* chat = R"("messages": [{"role": "user", "content": "hi"}])";
  const auto chat_param = [&](const std::string& extra) { return param_of("{" + std::string(chat) + ", " + extra + "}", true); };
  EXPECT_EQ(chat_param(R"("functions": [{"name": "f"}])"), "functions");
  EXPECT_EQ(chat_param(R"("tool_choice": "required")"), "tool_choice");  // needs tools (tool_request.h)
  // Output constraints are read (test_output_constraint_fields.cpp); what cannot be enforced is refused.
  EXPECT_EQ(chat_param(R"("response_format": {"type": "json_object"})"), "<no error>");
  EXPECT_EQ(chat_param(R"("guided_json": {"type": "object"})"), "<no error>");
  EXPECT_EQ(chat_param(R"("guided_grammar": "root ::= x")"), "guided_grammar");
  EXPECT_EQ(param_of(R"({"prompt": "x", "suffix": "end"})"), "suffix");
  EXPECT_EQ(param_of(R"({"prompt": "x", "best_of": 3})"), "best_of");
  EXPECT_EQ(param_of(R"({"prompt": "x", "use_beam_search": true})"), "use_beam_search");
  // vLLM fields that change the output (they were ignored, so the tokens they rule out came back with a 200).
  EXPECT_EQ(param_of(R"({"prompt": "x", "logits_processors": ["a.b"]})"), "logits_processors");
  EXPECT_EQ(param_of(R"({"prompt": "x", "return_tokens_as_token_ids": true})"), "return_tokens_as_token_ids");
  EXPECT_EQ(chat_param(R"("echo": true)"), "echo");
  EXPECT_EQ(chat_param(R"("chat_template": "{{ 'X' }}")"), "chat_template");
  EXPECT_EQ(chat_param(R"("echo": false, "chat_template": null, "allowed_token_ids": null, "bad_words": [],
                          "return_tokens_as_token_ids": false)"), "<no error>");
  // What asks for nothing is accepted: no tools, tool_choice none, plain text, best_of within n.
  EXPECT_EQ(chat_param(R"("tools": [], "tool_choice": "none", "response_format": {"type": "text"})"), "<no error>");
  EXPECT_EQ(param_of(R"({"prompt": "x", "best_of": 2, "n": 2, "suffix": null})"), "<no error>");
  EXPECT_EQ(param_of(R"({"prompt": "x", "best_of": 1.0})"), "<no error>");
  for (const char* bad : {"0", "-5", "true", "1.5", "\"1\""})  // not a count of at least 1
    EXPECT_EQ(param_of(fmt::format(R"({{"prompt": "x", "best_of": {}}})", bad)), "best_of") << bad;
  EXPECT_EQ(check_request_fields(nlohmann::ordered_json::parse(R"({"prompt": "x", "zzz": 1, "metadata": {}, "n": 1})"), false),
            (std::vector<std::string>{"zzz", "metadata"}));
  EXPECT_EQ(check_request_fields(nlohmann::ordered_json::parse(R"({"messages": [], "top_logprobs": 2})"), true),
            std::vector<std::string>{});
}

TEST(OpenAiRequest, ErrorsNameTheField) {
  EXPECT_EQ(param_of(R"({"prompt": "x", "stop": ["a", ""]})"), "stop");  // vLLM refuses an empty stop string too
  EXPECT_EQ(param_of(R"({"prompt": "x", "stop": ""})"), "stop");
  EXPECT_EQ(param_of(R"({"prompt": "x", "temperature": "hot"})"), "temperature");
  EXPECT_EQ(param_of(R"({"prompt": "x", "max_tokens": 0})"), "max_tokens");
  EXPECT_EQ(param_of(R"({"prompt": "x", "top_p": 0})"), "top_p");
  EXPECT_EQ(param_of(R"({"prompt": "x", "n": 0})"), "n");
  EXPECT_EQ(param_of(R"({"prompt": "x", "stop": 3})"), "stop");
  EXPECT_EQ(param_of(R"({"prompt": {"a": 1}})"), "prompt");
  EXPECT_EQ(param_of(R"({"prompt": [1, "a"]})"), "prompt");
  EXPECT_EQ(param_of(R"({"max_tokens": 3})"), "prompt");
  EXPECT_EQ(param_of(R"({"messages": "hi"})", true), "messages");
  EXPECT_EQ(param_of(R"({"messages": [{"content": "hi"}]})", true), "messages[0].role");
  EXPECT_THROW(parse_completion_request("{not json"), ApiError);
  EXPECT_THROW(parse_completion_request("[1]"), ApiError);
}

// Integers are range-checked before they are narrowed: 2^32 + 1 must not become 1 (n, top_k, priority),
// and neither 2^64 - 1 nor 1e300 may wrap or overflow.
TEST(OpenAiRequest, IntegersOutOfRangeAreRejectedBeforeNarrowing) {
  for (const char* field : {"n", "top_k", "priority", "max_tokens", "logprobs"}) {
    SCOPED_TRACE(field);
    for (const char* value : {"4294967297", "18446744073709551615", "1e300", "-9223372036854775808", "2.5", "\"3\""})
      EXPECT_EQ(param_of(fmt::format(R"({{"prompt": "x", "{}": {}}})", field, value)), field) << value;
  }
  EXPECT_EQ(parse_completion_request(R"({"prompt": "x", "n": 4.0, "top_k": -1, "priority": -2147483648})").n, 4);
  EXPECT_EQ(parse_completion_request(R"({"prompt": "x", "max_tokens": 2147483647})").params.max_tokens, 2147483647);
  EXPECT_EQ(param_of(R"({"prompt": "x", "max_tokens": 2147483648})"), "max_tokens");
  EXPECT_EQ(param_of(R"({"prompt": "x", "priority": 2147483648})"), "priority");
  // Beyond int64 a literal reads as a float that rounds back inside it (-2^63 - 1 -> -2^63): floats count as
  // integers only within +-2^53, where they are exact.
  EXPECT_EQ(param_of(R"({"prompt": "x", "seed": -9223372036854775809})"), "seed");
  EXPECT_EQ(param_of(R"({"prompt": "x", "seed": 1e17})"), "seed");
  EXPECT_EQ(parse_completion_request(R"({"prompt": "x", "seed": 9007199254740992.0})").params.seed, uint64_t{1} << 53);
}

// A client's text may hold a NUL byte: the error message keeps what follows it (it was cut there).
TEST(OpenAiRequest, ErrorMessagesKeepNulBytes) {
  const ApiError e(404, std::string("The model `a\0b` does not exist.", 32), "model");
  EXPECT_EQ(e.to_json()["error"]["message"].get<std::string>(), std::string("The model `a\0b` does not exist.", 32));
}

// Stop strings are matched against every generated byte of every choice: their number and total size are bounded
// (RequestLimits), with a 400 naming `stop`; at the limits they are accepted.
TEST(OpenAiRequest, StopStringsBeyondTheLimitsAre400) {
  const auto stops = [](int count, size_t each) {
    nlohmann::json body = {{"prompt", "x"}, {"stop", std::vector<std::string>(count, std::string(each, 'a'))}};
    return body.dump();
  };
  const RequestLimits limits{.max_stop_strings = 4, .max_stop_bytes = 40};
  EXPECT_EQ(parse_completion_request(stops(4, 10), limits).stop.size(), 4u);
  for (const std::string& body : {stops(5, 1), stops(2, 21)}) {
    try {
      parse_completion_request(body, limits);
      ADD_FAILURE() << "no error for " << body.substr(0, 60);
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status(), 400);
      EXPECT_EQ(e.param(), "stop");
    }
  }
  EXPECT_EQ(parse_completion_request(stops(128, 512)).stop.size(), 128u);  // the defaults: 128 strings, 64 KiB
  EXPECT_THROW(parse_completion_request(stops(129, 1)), ApiError);
  EXPECT_THROW(parse_completion_request(stops(2, 32769)), ApiError);
}

// Deep nesting is refused before parsing (it used to overflow the stack in a recursive copy), wherever it
// sits, and brackets inside strings do not count.
TEST(OpenAiRequest, NestingDeeperThanTheLimitIs400) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  try {
    parse_completion_request(R"({"prompt": "x", "unknown": )" + deep + "}");
    ADD_FAILURE() << "no error";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_NE(std::string(e.what()).find("deeper than 128"), std::string::npos) << e.what();
  }
  const std::string chat_deep = R"({"messages": [{"role": "user", "content": "hi", "x": )" + std::string(30000, '[') +
                                std::string(30000, ']') + "}]}";
  EXPECT_THROW(parse_chat_request(chat_deep), ApiError);
  EXPECT_THROW(parse_json_object(R"({"a": [[[[1]]]]})", 4), ApiError);
  EXPECT_NO_THROW(parse_json_object(R"({"a": [[[1]]]})", 4));
  EXPECT_EQ(json_nesting_depth(R"({"a": "[[[[{{{{\"[[[["})", 100), 1);
  EXPECT_NO_THROW(parse_completion_request(R"({"prompt": ")" + std::string(1000, '[') + R"("})"));
}

// A tool call's arguments (a JSON text inside the body) are bounded by the server's --max-json-depth, as the body is.
TEST(OpenAiRequest, ToolCallArgumentsFollowTheConfiguredDepth) {
  const auto chat_with_arguments = [](int depth) {
    const std::string args = std::string(depth - 1, '[') + "1" + std::string(depth - 1, ']');
    return R"({"messages": [{"role": "assistant", "content": null, "tool_calls": [{"id": "c", "type": "function",
                "function": {"name": "f", "arguments": "{\"a\": )" + args + R"(}"}}]}]})";
  };
  const RequestLimits tight{.max_json_depth = 8};
  EXPECT_NO_THROW(parse_chat_request(chat_with_arguments(8), tight));
  try {
    parse_chat_request(chat_with_arguments(9), tight);
    ADD_FAILURE() << "no error";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_NE(std::string(e.what()).find("at most 8 levels"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("tool_calls[0].function.arguments"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(parse_chat_request(chat_with_arguments(9)));  // the default, 128
}

// Found by a hostile sweep: ordered_json's parser searched an object's keys for a duplicate at every insertion, so
// 160,000 keys took 25 s on a request thread (and two such bodies held both). Now linear; order and the JSON
// "last value wins" rule as before.
TEST(OpenAiRequest, ManyKeysParseInLinearTime) {
  std::string body = R"({"prompt": "x", "junk": {)";
  for (int i = 0; i < 100000; ++i) body += fmt::format("{}\"k{}\": {}", i ? ", " : "", i, i);
  body += "}}";
  const auto t0 = std::chrono::steady_clock::now();
  const nlohmann::ordered_json o = parse_json_object(body);
  // (0.2 s here, about 1 s under ASan; before: about 10 s, quadratic)
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(4));
  ASSERT_EQ(o["junk"].size(), 100000u);
  EXPECT_EQ(o["junk"].begin().key(), "k0");
  EXPECT_EQ((--o["junk"].end()).key(), "k99999");
  const nlohmann::ordered_json d = parse_json_object(R"({"b": 1, "a": [1, {"z": 0, "y": 1}], "b": 2})");
  EXPECT_EQ(d.dump(), R"({"b":2,"a":[1,{"z":0,"y":1}]})");  // the first position, the last value
  EXPECT_EQ(parse_ordered_json(R"([1, "x", null, true, 2.5, -3])", 4).dump(), R"([1,"x",null,true,2.5,-3])");
  EXPECT_THROW(parse_ordered_json("[[[[[1]]]]]", 4), JsonTooDeep);
}

// A body that is not JSON says where it stops being JSON; a number beyond double's range says so (both were "not
// valid JSON").
TEST(OpenAiRequest, MalformedJsonSaysWhy) {
  const auto message = [](const std::string& body) {
    try {
      parse_completion_request(body);
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status(), 400);
      return std::string(e.what());
    }
    return std::string("<no error>");
  };
  EXPECT_EQ(message(R"({"prompt": "x", "max_tokens": 4,})"), "the request body is not valid JSON (at byte 33)");
  EXPECT_EQ(message(R"({"prompt": "x", "temperature": NaN})"), "the request body is not valid JSON (at byte 32)");
  EXPECT_NE(message(R"({"prompt": "x", "max_tokens": 1e400})").find("number out of range"), std::string::npos);
}

// prompts x n is bounded, so one body cannot fan out into millions of sequences.
TEST(OpenAiRequest, TooManySequencesIs400) {
  RequestLimits limits;
  limits.max_sequences = 6;
  EXPECT_NO_THROW(parse_completion_request(R"({"prompt": ["a", "b", "c"], "n": 2})", limits));
  EXPECT_THROW(parse_completion_request(R"({"prompt": ["a", "b", "c"], "n": 3})", limits), ApiError);
  EXPECT_THROW(parse_completion_request(R"({"prompt": [[1], [2], [3], [4], [5], [6], [7]]})", limits), ApiError);
  EXPECT_NO_THROW(parse_completion_request(R"({"prompt": [1, 2, 3, 4, 5, 6, 7, 8]})", limits));  // one prompt
  limits.max_n = 2;
  EXPECT_EQ(param_of(R"({"prompt": "x", "n": 3})"), "<no error>");
  EXPECT_THROW(parse_completion_request(R"({"prompt": "x", "n": 3})", limits), ApiError);
}

TEST(ApiKeys, BearerLookup) {
  ApiKeys keys;
  EXPECT_FALSE(keys.enabled());
  keys.add("k1", Tenant{"alice", 2});
  EXPECT_TRUE(keys.enabled());
  ASSERT_NE(keys.authenticate("Bearer k1"), nullptr);
  EXPECT_EQ(keys.authenticate("Bearer k1")->name, "alice");
  EXPECT_EQ(keys.authenticate("Bearer k2"), nullptr);
  EXPECT_EQ(keys.authenticate("k1"), nullptr);
  EXPECT_EQ(keys.authenticate(""), nullptr);
  EXPECT_NE(keys.authenticate("bearer k1"), nullptr);  // the scheme is case-insensitive
  EXPECT_NE(keys.authenticate("BEARER k1"), nullptr);
}

// Key files that used to be accepted silently, each now one error naming the file: an empty one (it switched
// authentication off), a key given twice, an unknown field (a misspelt limit was ignored), a limit beyond int (2^32
// became 0, unlimited), a tenant name that is not UTF-8 (it reached /metrics), a tenant in both files, a tenant named
// twice in a tenants file (the first entry was dropped), a key no header can carry.
TEST(ApiKeys, FilesThatWouldWeakenAuthenticationAreRefused) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "pagoda-api-keys-test";
  std::filesystem::create_directories(dir);
  int n = 0;
  const auto file = [&](const std::string& text) {
    const std::string path = (dir / ("f" + std::to_string(n++))).string();
    std::ofstream(path) << text;
    return path;
  };
  const auto refused = [&](const std::string& keys_file, const std::string& tenants_file, const std::string& message) {
    ApiKeys keys;
    try {
      if (!keys_file.empty()) keys.load_file(keys_file);
      if (!tenants_file.empty()) keys.load_tenants_file(tenants_file);
      ADD_FAILURE() << "accepted: " << message;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  };
  for (const std::string empty : {"", "# only a comment\n", "{}", R"({"keys": []})"}) refused(file(empty), "", "holds no API keys");
  refused(dir.string(), "", "is a directory");
  refused(file("k1 alice\nk1 bob\n"), "", "given twice");
  refused(file(R"({"k1": {"tenant": "a", "max_concurent_requests": 1}})"), "", "unknown field \"max_concurent_requests\"");
  refused(file(R"({"k1": {"tenant": "a", "max_concurrent_requests": 4294967296}})"), "", "max_concurrent_requests must be");
  refused(file("k1 bad\xff\xfename\n"), "", "UTF-8 text without control characters");
  // "other" labels the metrics of tenants past the 64th: a tenant of that name would merge with them.
  refused(file("k1 other\n"), "", "the tenant name 'other' is reserved");
  refused("", file(R"({"tenants": {"other": {"keys": ["k2"]}}})"), "the tenant name 'other' is reserved");
  refused(file("k1 alice 1 2 3\n"), "", "expected KEY TENANT");
  refused(file("k1 alice\n"), file(R"({"tenants": {"alice": {"keys": ["k2"]}}})"), "tenant 'alice' is given in both");
  refused("", file(R"({"tenants": {"a": {"keys": ["k1"]}, "a": {"keys": ["k2"]}}})"), "tenant 'a' is given twice");
  refused("", file(R"({"tenants": {}})"), "holds no tenants");
  // Sweep 5: a misspelt section was ignored, shares over the whole pool started, "4abc" was a limit of 4.
  refused("", file(R"({"tenants": {"a": {"keys": ["k1"]}}, "tenant": {}})"), "unknown field \"tenant\"");
  refused("", file(R"({"tenants": {"a": {"keys": ["k1"], "kv_share": 0.9}, "b": {"keys": ["k2"], "kv_share": 0.9}}})"),
          "add up to 1.8");
  refused("", file(R"({"tenants": {"a": {"keys": ["k1"], "prompt_tokens_per_step": -1}}})"),
          "prompt_tokens_per_step must be a non-negative integer");
  refused("", file(R"({"tenants": {"a": {"keys": ["k1"], "prompt_tokens_per_step": 2.5}}})"),
          "prompt_tokens_per_step must be a non-negative integer");
  refused(file("k1 alice 4abc\n"), "", "MAX_CONCURRENT must be an integer");
  refused(file("k1 alice 4 2x\n"), "", "MAX_PER_SECOND must be a number");
  {  // a BOM before a JSON keys file: read as JSON, not as the key `\ufeff{"k1":`
    ApiKeys bom;
    bom.load_file(file("\xEF\xBB\xBF{\"k1\": \"alice\"}"));
    ASSERT_NE(bom.authenticate("Bearer k1"), nullptr);
    EXPECT_EQ(bom.authenticate("Bearer k1")->name, "alice");
    ApiKeys tiny;  // any finite rate, denormals too
    tiny.load_file(file("k1 alice 1 1e-320\n"));
    EXPECT_GT(tiny.authenticate("Bearer k1")->max_requests_per_second, 0.0);
  }
  ApiKeys keys;
  EXPECT_THROW(keys.add("k 1", Tenant{"a"}), Error);
  EXPECT_THROW(keys.add("k1\t", Tenant{"a"}), Error);
  // What is well-formed still loads: two tenants in two files, a JSON keys file with its limits.
  ApiKeys good;
  good.load_file(file(R"({"k1": {"tenant": "a", "max_concurrent_requests": 2, "max_requests_per_second": 0.5}})"));
  good.load_tenants_file(file(R"({"tenants": {"b": {"keys": ["k2"]}, "c": {"keys": ["k3"], "prompt_tokens_per_step": 256}}})"));
  EXPECT_EQ(good.authenticate("Bearer k3")->kv().prompt_tokens_per_step, 256);
  EXPECT_EQ(good.authenticate("Bearer k2")->kv().prompt_tokens_per_step, 0);
  ASSERT_NE(good.authenticate("Bearer k1"), nullptr);
  EXPECT_EQ(good.authenticate("Bearer k1")->max_concurrent_requests, 2);
  EXPECT_EQ(good.authenticate("Bearer k3")->name, "c");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace pagoda::server
