"""A GPU check of constrained decoding: `pagoda serve --device cuda`, constrained requests, outputs checked with
the standard library (the GPU machine has no jsonschema); and an unconstrained greedy request's text unchanged
while a constrained one runs beside it.
  python3 tests/tools/structured_gpu.py PAGODA_BINARY MODEL_DIR"""
import json, re, subprocess, sys, time, urllib.request
pagoda, model = sys.argv[1], sys.argv[2]
proc = subprocess.Popen([pagoda, "serve", "--device", "cuda", "-m", model, "--port", "18555", "--host", "127.0.0.1"],
                        stderr=subprocess.PIPE, text=True)
for line in proc.stderr:
    if "serving" in line: break
def post(path, body):
    req = urllib.request.Request("http://127.0.0.1:18555" + path, json.dumps(body).encode(), {"Content-Type": "application/json"})
    return json.load(urllib.request.urlopen(req, timeout=300))
schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 10},
          "age": {"type": "integer", "minimum": 0, "maximum": 120}, "p": {"type": "number", "minimum": 0, "maximum": 1},
          "tags": {"type": "array", "items": {"enum": ["a", "b", 3]}, "maxItems": 3}}, "required": ["name", "age", "p"]}
ok = fin = 0
t0 = time.time()
for seed in range(6):
    out = post("/v1/chat/completions", {"messages": [{"role": "user", "content": "JSON please"}], "max_tokens": 300,
               "temperature": 1, "seed": seed, "n": 4, "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}})
    for c in out["choices"]:
        if c["finish_reason"] != "stop": continue
        fin += 1
        v = json.loads(c["message"]["content"])
        assert set(v) <= {"name", "age", "p", "tags"} and {"name", "age", "p"} <= set(v), v
        assert isinstance(v["name"], str) and len(v["name"]) <= 10, v
        assert isinstance(v["age"], int) and 0 <= v["age"] <= 120, v
        assert isinstance(v["p"], (int, float)) and 0 <= v["p"] <= 1, v
        assert all(t in ("a", "b", 3) for t in v.get("tags", [])) and len(v.get("tags", [])) <= 3, v
        ok += 1
out = post("/v1/completions", {"prompt": "x", "max_tokens": 20, "n": 8, "temperature": 1, "guided_regex": "(yes|no), [0-9]{1,3}"})
for c in out["choices"]:
    assert re.fullmatch("(yes|no), [0-9]{1,3}", c["text"]), c["text"]
# Unconstrained and constrained requests in one batch: the unconstrained one's greedy text is unchanged.
plain = post("/v1/completions", {"prompt": "Once", "max_tokens": 16, "temperature": 0})["choices"][0]["text"]
import threading
res = {}
def bg(): res["c"] = post("/v1/completions", {"prompt": "Once", "max_tokens": 64, "temperature": 1, "guided_json": schema})
th = threading.Thread(target=bg); th.start()
again = post("/v1/completions", {"prompt": "Once", "max_tokens": 16, "temperature": 0})["choices"][0]["text"]
th.join()
assert again == plain, (again, plain)
print(f"GPU structured: {ok}/{fin} finished outputs valid of 24, regex 8/8, mixed batch unchanged; {time.time() - t0:.1f} s")
proc.terminate(); proc.wait()
