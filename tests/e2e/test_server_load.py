"""`pagoda serve` holds 1,000 concurrent streaming connections on a few threads: every stream completes
with the right (greedy) text, and the process's thread count stays small."""
import asyncio
import json
import os
import resource
import socket
import struct
import time
import unittest

import pagoda_cli
from test_server import Server

NUM_STREAMS = 1000
MAX_TOKENS = 8


async def stream_once(port, prompt):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    body = json.dumps({"prompt": prompt, "max_tokens": MAX_TOKENS, "temperature": 0, "stream": True})
    writer.write((f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  f"Connection: close\r\nContent-Length: {len(body)}\r\n\r\n{body}").encode())
    await writer.drain()
    raw = await reader.read()
    writer.close()
    head, _, rest = raw.partition(b"\r\n\r\n")
    assert b"200 OK" in head, head
    # De-chunk the body.
    data = b""
    while rest:
        size_line, _, rest = rest.partition(b"\r\n")
        size = int(size_line, 16)
        if size == 0:
            break
        data += rest[:size]
        rest = rest[size + 2:]
    text = ""
    done = False
    for block in data.decode().split("\n\n"):
        if not block:
            continue
        payload = block[len("data: "):]
        if payload == "[DONE]":
            done = True
            continue
        text += json.loads(payload)["choices"][0]["text"]
    assert done
    return text


async def stream_and_reset(port, prompt):
    """A stream that the client resets (RST, not FIN) once its first tokens arrive."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    body = json.dumps({"prompt": prompt, "max_tokens": 400, "ignore_eos": True, "stream": True})
    writer.write((f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  f"Content-Length: {len(body)}\r\n\r\n{body}").encode())
    await writer.drain()
    got = b""
    while b"data: " not in got:
        chunk = await reader.read(4096)
        if not chunk:
            break
        got += chunk
    writer.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


class ManyStreams(unittest.TestCase):
    def test_disconnect_storm_frees_every_block(self):
        # 1,000 streams at once, half of them reset mid-stream by the client: the other half complete with
        # the right text, and afterwards nothing runs and no KV block is in use.
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft < 4 * NUM_STREAMS and (hard == resource.RLIM_INFINITY or hard >= 4 * NUM_STREAMS):
            resource.setrlimit(resource.RLIMIT_NOFILE, (4 * NUM_STREAMS, hard))
        server = Server("--max-num-seqs", "256")
        try:
            status, out = server.post("/v1/completions", {"prompt": "Lily", "max_tokens": MAX_TOKENS, "temperature": 0})
            expected = out["choices"][0]["text"]

            async def storm():
                tasks = [asyncio.create_task(stream_and_reset(server.port, "Lily") if i % 2 else
                                             stream_once(server.port, "Lily")) for i in range(NUM_STREAMS)]
                return await asyncio.gather(*tasks)

            results = asyncio.run(asyncio.wait_for(storm(), 600))
            for i in range(0, NUM_STREAMS, 2):
                self.assertEqual(results[i], expected, i)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and (server.metric("pagoda:num_requests_running") > 0 or
                                                   server.metric("pagoda:kv_cache_usage_perc") > 0):
                time.sleep(0.1)
            self.assertEqual(server.metric("pagoda:num_requests_running"), 0)
            self.assertEqual(server.metric("pagoda:num_requests_waiting"), 0)
            self.assertEqual(server.metric("pagoda:kv_cache_usage_perc"), 0, "blocks leaked")
            self.assertGreaterEqual(server.metric("pagoda:request_success_total", 'finished_reason="abort"'),
                                    NUM_STREAMS // 4, "the resets did not cancel their requests")
        finally:
            server.stop()

    def test_thousand_concurrent_streams(self):
        # Both ends need a descriptor per connection (the server inherits this limit).
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        want = 4 * NUM_STREAMS
        if soft < want and (hard == resource.RLIM_INFINITY or hard >= want):
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
        server = Server("--max-num-seqs", "256")
        try:
            prompts = ["Once upon a time", "The dog", "Lily", "One day"]
            expected = {}
            for p in prompts:
                status, out = server.post("/v1/completions", {"prompt": p, "max_tokens": MAX_TOKENS, "temperature": 0})
                expected[p] = out["choices"][0]["text"]
            max_threads = 0

            async def run_all():
                nonlocal max_threads
                tasks = [asyncio.create_task(stream_once(server.port, prompts[i % len(prompts)]))
                         for i in range(NUM_STREAMS)]
                while not all(t.done() for t in tasks):
                    max_threads = max(max_threads, len(os.listdir(f"/proc/{server.proc.pid}/task")))
                    await asyncio.sleep(0.05)
                return [t.result() for t in tasks]

            texts = asyncio.run(asyncio.wait_for(run_all(), 600))
            for i, text in enumerate(texts):
                self.assertEqual(text, expected[prompts[i % len(prompts)]], i)
            # I/O threads + the engine thread + the CPU backend's worker pool: no thread per connection.
            print(f"{NUM_STREAMS} streams, at most {max_threads} server threads")
            self.assertLess(max_threads, 64, max_threads)
            self.assertEqual(server.metric("pagoda:num_requests_running"), 0)
        finally:
            self.assertEqual(server.stop(), 0)


if __name__ == "__main__":
    pagoda_cli.main()
