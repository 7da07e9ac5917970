"""/health latency while clients stream n=16 completions with 20 logprobs a token (each token's alternatives are
decoded on the server's I/O strand): median, P99 and max of 100 idle and 200 loaded probes, in ms.
    python3 logprob_streams_health.py PAGODA MODEL [CLIENTS]"""
import json, socket, subprocess, sys, threading, time, http.client
pagoda, model = sys.argv[1], sys.argv[2]
port = 18652
p = subprocess.Popen([pagoda, "serve", "--host", "127.0.0.1", "--port", str(port), "-m", model], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
for _ in range(200):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close(); break
    except OSError: time.sleep(0.1)
time.sleep(1)
stop = False
def flood():
    while not stop:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        c.request("POST", "/v1/completions", json.dumps({"prompt": "Once upon a time", "max_tokens": 64, "n": 16, "logprobs": 20, "stream": True, "ignore_eos": True}), {"Content-Type": "application/json"})
        r = c.getresponse()
        while r.read(65536): pass
        c.close()
def health_lat(n=100):
    lats = []
    for _ in range(n):
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        t = time.time(); c.request("GET", "/health"); c.getresponse().read(); lats.append(time.time() - t); c.close()
        time.sleep(0.02)
    lats.sort(); return round(lats[len(lats)//2]*1e3, 2), round(lats[int(len(lats)*0.99)]*1e3, 2), round(lats[-1]*1e3, 2)
print("idle health ms (median, p99, max)", health_lat())
ts = [threading.Thread(target=flood) for _ in range(int(sys.argv[3]) if len(sys.argv) > 3 else 4)]
for t in ts: t.start()
time.sleep(2)
print("loaded health ms", health_lat(200))
stop = True
for t in ts: t.join()
p.terminate(); p.wait()
