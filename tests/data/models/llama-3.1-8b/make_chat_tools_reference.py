"""Writes chat_tools_reference.json: a chat with tools, a tool-call turn and a tool result, rendered with
chat_template.jinja by Python's jinja2 in the environment transformers' apply_chat_template builds
(ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols, its tojson and raise_exception),
after the conversion vLLM applies to OpenAI messages before rendering (content null -> "", each tool call's
arguments JSON string -> object). transformers itself is not installed where this was made; jinja2 3.1.6 was.

    python3 make_chat_tools_reference.py
"""
import json
import os

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))

REQUEST = {
    "messages": [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "What is the weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "chatcmpl-tool-1", "type": "function",
             "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\", \"unit\": \"celsius\"}"}}]},
        {"role": "tool", "tool_call_id": "chatcmpl-tool-1", "content": "{\"temperature\": 21, \"sky\": \"clear\"}"},
    ],
    "tools": [
        {"type": "function", "function": {
            "name": "get_weather",
            "description": "Get the current weather in a city",
            "parameters": {"type": "object",
                           "properties": {"city": {"type": "string", "description": "City name, e.g. Paris"},
                                          "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
                           "required": ["city"]}}},
        {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}},
    ],
}


def vllm_messages(messages):
    out = []
    for m in messages:
        m = json.loads(json.dumps(m))
        if m.get("content") is None:
            m["content"] = ""
        for call in m.get("tool_calls") or []:
            args = call["function"].get("arguments")
            call["function"]["arguments"] = json.loads(args) if args else {}
        out.append(m)
    return out


def render(template, messages, tools, add_generation_prompt):
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env.from_string(template).render(messages=messages, tools=tools, add_generation_prompt=add_generation_prompt,
                                            bos_token="<|begin_of_text|>", eos_token="<|eot_id|>")


def main():
    with open(os.path.join(HERE, "chat_template.jinja")) as f:
        template = f.read()
    messages = vllm_messages(REQUEST["messages"])
    out = {
        "request": REQUEST,
        "rendered": render(template, messages, REQUEST["tools"], True),
        "rendered_without_tools": render(template, messages[:2], None, True),
    }
    with open(os.path.join(HERE, "chat_tools_reference.json"), "w") as f:
        json.dump(out, f, indent=1, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()
