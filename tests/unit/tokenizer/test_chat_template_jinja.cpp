// Chat-template Jinja interpreter: expressions, statements, scoping, whitespace control, filters, tests
// and methods, each against the output Python jinja2 gives with transformers' settings
// (trim_blocks, lstrip_blocks, loopcontrols, tojson with ensure_ascii=False).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "pagoda/core/error.h"
#include "pagoda/tokenizer/chat_template.h"

namespace pagoda::test {
namespace {

const nlohmann::json kMessages = nlohmann::json::parse(R"([
  {"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}, {"role": "user", "content": "c"}])");

std::string render(const std::string& tmpl, nlohmann::json extra = nlohmann::json::object()) {
  ChatTemplate t(tmpl, "<s>", "</s>", "test.jinja");
  return t.render({.messages = kMessages, .add_generation_prompt = true, .extra = std::move(extra)});
}

struct Case {
  const char* name;
  const char* tmpl;
  const char* expected;
};

// Every expected string below was derived by hand and agrees with Python jinja2 3.1 configured as
// transformers configures it; `x` is the string 's' and `messages` is kMessages.
const Case kCases[] = {
    {"TrailingNewlineDropped", "Hello\n", "Hello"},
    {"Arithmetic", "{{ 1 + 2 * 3 }}|{{ 7 // 2 }},{{ -7 // 2 }},{{ -7 % 3 }},{{ 1 / 2 }},{{ 2 ** 10 }},{{ 4 / 2 }},"
                   "{{ 1e20 }},{{ 0.1 + 0.2 }}",
     "7|3,-4,2,0.5,1024,2.0,1e+20,0.30000000000000004"},
    {"PythonRepr", "{{ 'a' ~ 1 ~ none }}|{{ [1, 'a', none, true, 2.5] }}|{{ {'k': 'v'} }}|{{ \"it's\" }}|{{ [\"it's\"] }}",
     "a1None|[1, 'a', None, True, 2.5]|{'k': 'v'}|it's|[\"it's\"]"},
    {"FilterBindsTighterThanPlus", "{{ 'x' + '  y  ' | trim + 'z' }}", "xyz"},
    {"Logic", "{{ 1 < 2 < 3 }} {{ 'b' in 'abc' }} {{ 3 not in [1,2] }} {{ not true or false }} {{ 0 or 'x' }} [{{ 'a' and '' }}]",
     "True True True False x []"},
    {"Ternary", "{{ 'yes' if x else 'no' }}[{{ 'yes' if missing }}]{{ 'yes' if missing else 'no' }}", "yes[]no"},
    {"UndefinedIsEmptyAndFalsy",
     "[{{ missing }}]{% if missing %}T{% else %}F{% endif %}{{ missing | length }}{{ missing is defined }}"
     "{{ missing is not defined }}{{ missing ~ 'z' }}",
     "[]F0FalseTruez"},
    {"AttributeAndSubscript",
     "{{ messages[0].role }}/{{ messages[0]['content'] }}/{{ messages[0].get('name', 'anon') }}/"
     "{{ messages[0].name is defined }}/{{ messages[5] is defined }}",
     "user/a/anon/False/False"},
    {"Slicing",
     "{{ [1,2,3,4][1:] }}|{{ [1,2,3,4][:-1] }}|{{ [1,2,3,4][::2] }}|{{ 'hello'[::-1] }}|{{ [1,2,3][-1] }}|"
     "{{ '你好吗'[1:] }}|{{ messages[1:] | length }}|{{ [1,2,3,4][-3:-1] }}|{{ [1,2,3][5:] }}",
     "[2, 3, 4]|[1, 2, 3]|[1, 3]|olleh|3|好吗|2|[2, 3]|[]"},
    {"LoopVariables",
     "{% for x in ['a','b','c'] %}{{ loop.index0 }}{{ loop.index }}{{ loop.first }}{{ loop.last }}{{ loop.length }}"
     "{{ loop.revindex }}{{ loop.revindex0 }};{% endfor %}",
     "01TrueFalse332;12FalseFalse321;23FalseTrue310;"},
    {"LoopCycleAndNeighbours",
     "{% for x in [1,2,3] %}{{ loop.cycle('a','b') }}{{ loop.previtem | default('-') }}"
     "{{ loop.nextitem | default('-') }}{% endfor %}",
     "a-2b13a2-"},
    {"LoopElseAndFilterClause",
     "{% for x in [] %}x{% else %}empty{% endfor %}|"
     "{% for x in [1,2,3,4] if x is even %}{{ x }}/{{ loop.index }}/{{ loop.length }} {% endfor %}",
     "empty|2/1/2 4/2/2 "},
    {"LoopUnpacksItems",
     "{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }};{% endfor %}{% for k, v in {'c': 3} | items %}"
     "{{ k }}={{ v }}{% endfor %}",
     "a=1;b=2;c=3"},
    {"SetInLoopDoesNotLeak", "{% set x = 1 %}{% for i in [1,2] %}{% set x = x + i %}{{ x }}{% endfor %}{{ x }}", "231"},
    {"SetInLoopDoesNotCarryToNextIteration",
     "{% for i in [1,2] %}{% if i == 2 %}[{{ y }}]{% endif %}{% set y = i %}{% endfor %}[{{ y }}]", "[][]"},
    {"NamespaceCarriesStateOutOfLoop",
     "{% set ns = namespace(count=0, found=false) %}{% for m in [1,2,3] %}{% set ns.count = ns.count + m %}"
     "{% if m == 2 %}{% set ns.found = true %}{% endif %}{% endfor %}{{ ns.count }} {{ ns.found }}",
     "6 True"},
    {"BreakContinueRange",
     "{% for i in range(10) %}{% if i == 1 %}{% continue %}{% endif %}{% if i == 4 %}{% break %}{% endif %}{{ i }}"
     "{% endfor %}|{{ range(1, 7, 2) | list }}",
     "023|[1, 3, 5]"},
    {"Macro",
     "{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('Ann') }} "
     "{{ greet('Bob', punct='?') }}",
     "Hi Ann! Hi Bob?"},
    {"SetBlock", "{% set s %} a b {% endset %}[{{ s }}]{% set t | upper %}x{% endset %}{{ t }}", "[ a b ]X"},
    {"IfElifElse", "{% if x == 1 %}one{% elif x == 's' %}two{% else %}other{% endif %}", "two"},
    {"TupleSetAndSequenceOps", "{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set c = [1, 2] + [3] %}{{ c }}{{ 'ab' * 2 }}",
     "12[1, 2, 3]abab"},
    {"LastMessage",
     "{{ messages[-1]['content'] if messages else 'none' }}|{{ (messages | last).role }}|{{ messages | length > 2 }}",
     "c|user|True"},
    {"Raw", "{% raw %}{{ not evaluated }}{% endraw %}", "{{ not evaluated }}"},
    {"TagDelimitersInsideStringsAndDicts", "{{ '}}' }}|{% set y = '%}' %}{{ y }}|{{ {'a': {'b': 1}} }}|{{ '{#' }}",
     "}}|%}|{'a': {'b': 1}}|{#"},
    {"NestedLoopsShadowLoop",
     "{% for m in messages %}{% for c in m.content %}{{ loop.index }}{% endfor %}{{ loop.index }}{% endfor %}",
     "111213"},
    {"FilterAndGenerationBlocks", "{% filter upper %}abc{% endfilter %}|A{% generation %}B{% endgeneration %}C",
     "ABC|ABC"},
    {"SetInIfIsVisibleAfter", "{% if messages %}{% set y = 1 %}{% endif %}{{ y }}", "1"},
    {"MoreNumbers", "{{ 10 / 3 }}|{{ 1e16 }}|{{ 1e15 }}|{{ 1.5e-7 }}|{{ 0.0001 }}|{{ 7 % 2.5 }}|{{ -7.5 // 2 }}|"
                    "{{ 2.5 | round }}|{{ 2.567 | round(2) }}|{{ '42' | int + 1 }}|{{ 2 ** 10 }}",
     "3.3333333333333335|1e+16|1000000000000000.0|1.5e-07|0.0001|2.0|-4.0|2.0|2.57|43|1024"},
    {"SplitVariants", "{{ 'aXbX'.split('X', 1) }}|{{ '  a b  '.split(none, 1) }}|{{ 'a,b;c'.split(',')[1].split(';') }}|"
                      "{{ ', '.join(['x','y']) }}",
     "['a', 'bX']|['a', 'b  ']|['b', 'c']|x, y"},
    // Whitespace control.
    {"MinusStripsBothSides", "a  {{- 'b' -}}  c", "abc"},
    {"TrimBlocksEatsNewlineAfterTag", "{% if true %}\nyes\n{% endif %}\nend", "yes\nend"},
    {"LstripBlocksEatsIndentBeforeTag", "  {% if true %}\n  x\n  {% endif %}\n", "  x\n"},
    {"PlusKeepsIndentAndVariablesNotStripped", "  {%+ if true %}x{% endif %}|  {{ 'v' }}", "  x|  v"},
    {"Comments", "a {# note #} b\n  {# line comment #}\nc", "a  b\nc"},
    {"MinusInsideBlockTags", "{% if true -%}\n\n  x  {%- endif %}", "x"},
    {"PlusDisablesTrimBlocks", "{% if true +%}\nkeep{% endif %}", "\nkeep"},
    // Filters.
    {"Filters",
     "{{ '  Hi  ' | trim }}|{{ 'abc' | upper }}|{{ 'ABC' | lower }}|{{ 'hello World' | capitalize }}|"
     "{{ [1,2,3] | length }}|{{ '你好' | length }}|{{ [1,2,3] | first }}|{{ [1,2,3] | last }}|"
     "{{ ['a','b'] | join(', ') }}|{{ missing | default('dflt') }}|{{ '' | default('e', true) }}|"
     "{{ 'aaa' | replace('a', 'b', 2) }}|{{ 12 | string }}|{{ 'ab' | list }}|{{ 'xyx' | trim('x') }}",
     "Hi|ABC|abc|Hello world|3|2|1|3|a, b|dflt|e|bba|12|['a', 'b']|y"},
    {"ToJson", "{{ {'name': 'f', 'args': [1, 2.5, true, none], 'text': 'é\"\\n'} | tojson }}",
     "{\"name\": \"f\", \"args\": [1, 2.5, true, null], \"text\": \"é\\\"\\n\"}"},
    {"ToJsonIndent", "{{ {'a': [1, 2], 'b': {}, 'c': []} | tojson(indent=2) }}",
     "{\n  \"a\": [\n    1,\n    2\n  ],\n  \"b\": {},\n  \"c\": []\n}"},
    {"MapSelectSort",
     "{{ messages | selectattr('role', 'equalto', 'user') | map(attribute='content') | join(',') }}|"
     "{{ messages | map(attribute='role') | list }}|{{ messages | rejectattr('role', 'eq', 'user') | list | length }}|"
     "{{ [3,1,2] | sort }}|{{ [1,2,1] | unique | list }}|{{ [1,2] | reverse | list }}",
     "a,c|['user', 'assistant', 'user']|1|[1, 2, 3]|[1, 2]|[2, 1]"},
    // Tests and methods.
    {"Tests",
     "{{ x is string }}{{ x is number }}{{ 3 is integer }}{{ 3.0 is float }}{{ none is none }}{{ {} is mapping }}"
     "{{ 3 is divisibleby 3 }}{{ 3 is odd }}{{ 'ab' is lower }}{{ true is boolean }}",
     "TrueFalseTrueTrueTrueTrueTrueTrueTrueTrue"},
    {"StringAndDictMethods",
     "{{ '  x  '.strip() }}|{{ 'xxhixx'.lstrip('x') }}|{{ 'xxhixx'.rstrip('x') }}|{{ ' a b  c '.split() }}|"
     "{{ 'a,b,,c'.split(',') }}|{{ 'hello'.startswith('he') }}|{{ 'hello'.endswith(('x','lo')) }}|"
     "{{ 'hello wORLD'.title() }}|{{ 'Ab'.upper() }}{{ 'Ab'.lower() }}|{{ {'b': 1}.get('a') }}|"
     "{{ 'a-b'.replace('-', '+') }}",
     "x|hixx|xxhi|['a', 'b', 'c']|['a', 'b', '', 'c']|True|True|Hello World|ABab|None|a+b"},
};

class ChatTemplateJinja : public ::testing::TestWithParam<Case> {};

TEST_P(ChatTemplateJinja, RendersLikeJinja2) {
  const Case& c = GetParam();
  EXPECT_EQ(render(c.tmpl, {{"x", "s"}}), c.expected) << c.tmpl;
}

INSTANTIATE_TEST_SUITE_P(Cases, ChatTemplateJinja, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(ChatTemplateJinjaVars, StandardAndExtraVariables) {
  EXPECT_EQ(render("{{ bos_token }}|{{ eos_token }}|{{ add_generation_prompt }}|{{ tools is none }}|{{ date_string }}",
                   {{"date_string", "26 Jul 2024"}}),
            "<s>|</s>|True|True|26 Jul 2024");
  // Extra variables override the bos/eos defaults (as template kwargs do in transformers).
  EXPECT_EQ(render("{{ bos_token }}{{ tools | length }}", {{"bos_token", "B"}, {"tools", {1, 2}}}), "B2");
}

TEST(ChatTemplateJinjaVars, ToJsonKeepsTheKeyOrderOfTheMessages) {
  ChatTemplate t("{{ messages[0] | tojson }}|{% for k, v in messages[0].items() %}{{ k }},{% endfor %}", "<s>", "</s>");
  const auto messages = nlohmann::ordered_json::parse(R"([{"role": "user", "content": "x", "zeta": 1, "alpha": [2]}])");
  EXPECT_EQ(t.render({.messages = messages}),
            R"({"role": "user", "content": "x", "zeta": 1, "alpha": [2]}|role,content,zeta,alpha,)");
}

TEST(ChatTemplateJinjaVars, GenerationPromptFlag) {
  ChatTemplate t("{% if add_generation_prompt %}GEN{% else %}NONE{% endif %}", "", "");
  EXPECT_EQ(t.render({.messages = kMessages, .add_generation_prompt = true}), "GEN");
  EXPECT_EQ(t.render({.messages = kMessages, .add_generation_prompt = false}), "NONE");
}

// The error message of a failing construction, or "" when it parses.
std::string syntax_error(const std::string& tmpl) {
  try {
    ChatTemplate t(tmpl, "", "", "my_template");
  } catch (const InvalidRequest& e) {
    return std::string("unexpected InvalidRequest: ") + e.what();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ChatTemplateJinjaErrors, SyntaxErrorsNameSourceAndLine) {
  EXPECT_EQ(syntax_error("line one\n{{ 'a' + }}"), "my_template:2: unexpected end of print statement");
  EXPECT_EQ(syntax_error("{% for x in y %}\n\n{% endif %}"),
            "my_template:3: Encountered unknown tag 'endif'. Jinja was looking for the following tags: 'else' or "
            "'endfor'. The innermost block that needs to be closed is 'for'.");
  EXPECT_EQ(syntax_error("{% if x %}\nno end"),
            "my_template:2: Unexpected end of template. Jinja was looking for the following tags: 'elif', 'else' or "
            "'endif'. The innermost block that needs to be closed is 'if'.");
  EXPECT_EQ(syntax_error("a\nb {{ x | no_such_filter }}"), "my_template:2: No filter named 'no_such_filter'.");
  EXPECT_EQ(syntax_error("{{ x is no_such_test }}"), "my_template:1: No test named 'no_such_test'.");
  EXPECT_EQ(syntax_error("\n\n{{ 'unterminated }}"), "my_template:3: unexpected end of string");
  EXPECT_EQ(syntax_error("{{ x "), "my_template:1: unexpected end of template, expected '}}'");
  EXPECT_EQ(syntax_error("{% frobnicate %}"), "my_template:1: Encountered unknown tag 'frobnicate'.");
  EXPECT_EQ(syntax_error("{% break %}"), "my_template:1: 'break' outside of a loop");
  EXPECT_EQ(syntax_error("{# never closed"), "my_template:1: missing end of comment tag");
  // Found by fuzz_chat_template: a \U escape without hex digits threw std::invalid_argument out of the
  // lexer (std::stoul), which aborted whoever loaded the template.
  EXPECT_EQ(syntax_error("{{ '\\Uzzzzzzzz' }}"), "my_template:1: truncated \\U escape");
  EXPECT_EQ(syntax_error("{{ '\\x4' }}"), "my_template:1: truncated \\x escape");
  EXPECT_EQ(syntax_error("{{ '\\u+0e9' }}"), "my_template:1: truncated \\u escape");
  EXPECT_EQ(syntax_error("{{ '\\U00110000' }}"), "my_template:1: illegal Unicode character in a \\U escape");
  EXPECT_EQ(render("{{ '\\u00e9\\x41\\U0001F600' }}"), "\u00e9A\U0001F600");
  // Also found by it: a float literal beyond double's range threw std::out_of_range (std::stod). Python
  // reads it as inf.
  EXPECT_EQ(render("{{ 1e999 > 1e308 }}|{{ -1e999 < 0 }}"), "True|True");
}

std::string render_error(const std::string& tmpl) {
  try {
    render(tmpl);
  } catch (const InvalidRequest& e) {
    return e.what();
  }
  return "";
}

TEST(ChatTemplateJinjaErrors, RuntimeErrorsAreInvalidRequests) {
  EXPECT_EQ(render_error("{{ raise_exception('Bad roles!') }}"), "Bad roles!");
  // A request's error names the template, not its file (ChatTemplateConfig.ARequestsErrorDoesNotNameTheFile).
  EXPECT_EQ(render_error("a\n{% if true %}\n{{ missing.attr }}{% endif %}"), "chat template:3: 'missing' is undefined");
  EXPECT_EQ(render_error("{{ 1 + 'a' }}"), "chat template:1: unsupported operand type(s) for +: 'int' and 'str'");
  EXPECT_EQ(render_error("{{ 1 // 0 }}"), "chat template:1: integer division or modulo by zero");
  EXPECT_EQ(render_error("{% set x = 1 %}{% set x.y = 2 %}"), "chat template:1: cannot assign attribute on non-namespace object");
  EXPECT_NE(render_error("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}").find("maximum macro recursion depth"),
            std::string::npos);
}

}  // namespace
}  // namespace pagoda::test
