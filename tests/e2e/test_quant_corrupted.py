"""Corrupted or self-contradicting quantized checkpoints through the CLI: each is a copy of one of the small
reference checkpoints (models/quant/: AutoAWQ GEMM, GPTQ v1, compressed-tensors W4A16 / W8A16 / FP8; and
models/gguf-kquant/'s llama.cpp Q4_K_M file) with one tensor, config field or byte range changed, written into a
temp dir. `pagoda inspect` (and `generate`) must exit 1 with one line, `error: ...`, naming the tensor or the
config field that is wrong: never a crash, an abort or a second line. tests/unit/quant/test_quant_errors.cpp
checks the loader's messages in detail; this checks what a user of the binary sees."""
import json
import os
import shutil
import struct
import tempfile
import unittest

import pagoda_cli
from pagoda_cli import run


def data(*parts):
    return os.path.join(pagoda_cli.ARGS.data, *parts)


Q = "model.layers.0.self_attn.q_proj"
DOWN = "model.layers.1.mlp.down_proj"

# Bytes of one element of a safetensors dtype.
ELEM = {"F32": 4, "F16": 2, "BF16": 2, "I32": 4, "I64": 8, "F8_E4M3": 1, "I8": 1, "U8": 1}


class Checkpoint:
    """One of models/quant/'s variants in memory: config.json and the tensors, editable, written back as a
    checkpoint directory (the safetensors header's __metadata__, which records the tied embedding's alias, kept)."""

    def __init__(self, variant):
        src = data("models", "quant", variant)
        with open(os.path.join(src, "config.json")) as f:
            self.config = json.load(f)
        with open(os.path.join(src, "model.safetensors"), "rb") as f:
            n = struct.unpack("<Q", f.read(8))[0]
            header = json.loads(f.read(n))
            blob = f.read()
        self.metadata = header.pop("__metadata__", None)
        self.tensors = {name: [e["dtype"], list(e["shape"]), bytearray(blob[e["data_offsets"][0]:e["data_offsets"][1]])]
                        for name, e in header.items()}
        self.truncate_by = 0

    def quant(self):
        return self.config["quantization_config"]

    def ct_weights(self):
        return self.quant()["config_groups"]["group_0"]["weights"]

    def reshape(self, name, dtype, shape):
        """The tensor `name` replaced by zeros of another dtype and shape."""
        numel = 1
        for d in shape:
            numel *= d
        self.tensors[name] = [dtype, list(shape), bytearray(numel * ELEM[dtype])]

    def write(self, path):
        os.makedirs(path)
        header, offset = {}, 0
        for name, (dtype, shape, raw) in self.tensors.items():
            header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(raw)]}
            offset += len(raw)
        if self.metadata is not None:
            header["__metadata__"] = self.metadata
        h = json.dumps(header).encode()
        h += b" " * (-(8 + len(h)) % 8)
        blob = struct.pack("<Q", len(h)) + h + b"".join(bytes(e[2]) for e in self.tensors.values())
        with open(os.path.join(path, "model.safetensors"), "wb") as f:
            f.write(blob[:len(blob) - self.truncate_by])
        with open(os.path.join(path, "config.json"), "w") as f:
            json.dump(self.config, f, indent=2)
        return path


def gguf_tensor_infos(raw):
    """{name: (offset of its n_dims field in the file, dims, ggml type, offset of its data from the data section)}
    and the data section's start, of a GGUF v3 file (the header, read as llama.cpp's gguf.c reads it)."""
    pos = 0

    def take(fmt):
        nonlocal pos
        values = struct.unpack_from("<" + fmt, raw, pos)
        pos += struct.calcsize("<" + fmt)
        return values[0] if len(values) == 1 else values

    def string():
        nonlocal pos
        n = take("Q")
        pos += n
        return raw[pos - n:pos].decode()

    scalar = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}

    def value(vtype):
        if vtype == 8:
            return string()
        if vtype == 9:
            inner, n = take("I"), take("Q")
            return [value(inner) for _ in range(n)]
        return take(scalar[vtype])

    assert raw[:4] == b"GGUF"
    pos = 4
    _version, n_tensors, n_kv = take("I"), take("Q"), take("Q")
    alignment = 32
    for _ in range(n_kv):
        key = string()
        v = value(take("I"))
        if key == "general.alignment":
            alignment = v
    infos = {}
    for _ in range(n_tensors):
        name = string()
        at = pos
        n_dims = take("I")
        dims = [take("Q") for _ in range(n_dims)]
        infos[name] = (at, dims, take("I"), take("Q"))
    return infos, pos + (-pos % alignment)


def unexpected_output(stderr):
    """What a crash, an abort or an uncaught exception would print."""
    for marker in ("Traceback", "terminate called", "Aborted", "Segmentation fault", "core dumped",
                   "error: unexpected", "AddressSanitizer", "PAGODA_CHECK"):
        if marker in stderr:
            return marker
    return None


class CorruptedCheckpoints(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.count = 0

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def new_dir(self, label):
        type(self).count += 1
        return os.path.join(self.tmp.name, f"{self.count:02d}-{label}")

    def assert_one_line_error(self, model, needles, command=("inspect",)):
        argv = [*command, model] if command == ("inspect",) else [*command, "--model", model]
        proc = run(*argv, check=False, timeout=60)
        label = f"{os.path.basename(model)}: {proc.stderr!r}"
        self.assertEqual(proc.returncode, 1, label)  # not a signal (negative), not success
        self.assertIsNone(unexpected_output(proc.stderr), label)
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        self.assertEqual(len(lines), 1, label)
        self.assertEqual(len(proc.stderr.strip().splitlines()), 1, label)
        self.assertTrue(lines[0].startswith("error: "), label)
        for needle in needles:
            self.assertIn(needle, lines[0], label)
        self.assertEqual(proc.stdout, "", label)  # nothing printed before the load failed

    def check(self, label, checkpoint, needles, command=("inspect",)):
        with self.subTest(label):
            self.assert_one_line_error(checkpoint.write(self.new_dir(label)), needles, command)

    def test_unmodified_copies_load(self):
        # The rewriting itself keeps a checkpoint loadable: the errors below come from the edits alone.
        for variant in ("awq-w4-g128-gemm", "gptq-w4-g64-asym-descact", "ct-w4a16-g128", "ct-w8a16-channel",
                        "ct-fp8-dynamic"):
            with self.subTest(variant):
                path = Checkpoint(variant).write(self.new_dir("copy-" + variant))
                proc = run("inspect", path, check=False)
                self.assertEqual(proc.returncode, 0, proc.stderr)
                self.assertIn("(safetensors)", proc.stdout)
        path = self.new_dir("copy-gguf.gguf")
        shutil.copyfile(data("models", "gguf-kquant", "kq-256-Q4_K_M.gguf"), path)
        self.assertEqual(run("inspect", path, check=False).returncode, 0)

    def test_awq(self):
        c = Checkpoint("awq-w4-g128-gemm")
        c.reshape(Q + ".qweight", "I32", [64, 16])  # half of in_features 128
        self.check("awq-qweight-shape", c, [Q + ".qweight", "shape [64, 16]", "expected [128, 16]"])

        c = Checkpoint("awq-w4-g128-gemm")
        c.reshape(Q + ".scales", "I32", [1, 128])
        self.check("awq-scales-dtype", c, [Q + ".scales", "dtype I32"])

        c = Checkpoint("awq-w4-g128-gemm")
        del c.tensors[DOWN + ".qzeros"]
        self.check("awq-missing-qzeros", c, ["missing tensor " + DOWN + ".qzeros"])

        c = Checkpoint("awq-w4-g32-gemm")
        c.quant()["group_size"] = 96
        self.check("awq-group-size-96", c, ["group_size 96", "does not divide in_features 128"])

        c = Checkpoint("awq-w4-g32-gemm")
        c.quant()["group_size"] = 64  # the tensors hold 4 groups of 32
        self.check("awq-group-size-vs-scales", c, [Q + ".qzeros", "expected [2, 16]"])

        c = Checkpoint("awq-w4-g128-gemm")
        c.quant()["bits"] = 3
        self.check("awq-3-bits", c, ["quantization_config.bits", "is 3"])

        c = Checkpoint("awq-w4-g128-gemm")
        c.quant()["version"] = "gemv"
        self.check("awq-gemv", c, ["quantization_config.version"])

        c = Checkpoint("awq-w4-g128-gemm")
        c.tensors[Q + ".scales"][2][2:4] = b"\x00\x7e"  # F16 NaN: group 0 of output row 1
        self.check("awq-nan-scale", c, [Q, "scale [1, 0] is nan"])

        c = Checkpoint("awq-w4-g128-gemm")
        c.config["hidden_size"] = 256  # the config no longer matches any tensor
        self.check("awq-config-hidden-size", c, ["model.embed_tokens.weight", "expected [2048, 256]"])

        c = Checkpoint("awq-w4-g32-gemm")
        c.config["intermediate_size"] = 380  # AWQ packs 8 output columns a word: 380 does not divide
        self.check("awq-packed-columns", c, [".mlp.gate_proj.qweight", "cannot pack out_features 380"])

    def test_gptq(self):
        c = Checkpoint("gptq-w4-g64-asym-descact")
        c.tensors[Q + ".g_idx"][2][4 * 5:4 * 6] = struct.pack("<i", 2)  # two groups of 64: 0 and 1 are valid
        self.check("gptq-g-idx-out-of-range", c, [Q + ".g_idx", "g_idx[5] = 2"])

        c = Checkpoint("gptq-w4-g64-asym-descact")
        c.tensors[DOWN + ".g_idx"][2][0:4] = struct.pack("<i", -1)
        self.check("gptq-g-idx-negative", c, [DOWN + ".g_idx", "g_idx[0] = -1"])

        c = Checkpoint("gptq-w4-g64-asym-descact")
        del c.tensors[Q + ".g_idx"]
        self.check("gptq-desc-act-without-g-idx", c, ["missing tensor " + Q + ".g_idx", "desc_act"])

        c = Checkpoint("gptq-w4-g128-sym")
        c.quant()["bits"] = 8  # 4-bit tensors: qweight holds 8 codes a word, not 4
        self.check("gptq-8-bits-declared", c, [Q + ".qweight", "expected [32, 128]"])

        c = Checkpoint("gptq-w4-g128-sym")
        c.reshape(Q + ".qweight", "I32", [15, 128])  # 15 words of 8 codes: 120 rows of K, not 128
        self.check("gptq-packed-rows", c, [Q + ".qweight", "shape [15, 128]", "expected [16, 128]"])

        c = Checkpoint("gptq-w4-g128-sym")
        c.config["intermediate_size"] = 380  # qzeros packs 8 output columns a word: 380 does not divide
        self.check("gptq-packed-zeros", c, [".mlp.gate_proj.qzeros", "cannot pack out_features 380"])

        c = Checkpoint("gptq-w4-g128-sym")
        c.quant()["checkpoint_format"] = "marlin"
        self.check("gptq-marlin", c, ["quantization_config.checkpoint_format", "marlin"])

        c = Checkpoint("gptq-w4-g128-sym")
        c.tensors[DOWN + ".qzeros"][2][0] = 0x72  # the first column's stored zero point 2 (+1 = 3), not sym's 8
        self.check("gptq-zero-point-vs-sym", c, [DOWN + ".qzeros", "zero point 3"])

    def test_compressed_tensors(self):
        c = Checkpoint("ct-w4a16-g128")
        c.tensors[Q + ".weight_shape"][2][:] = struct.pack("<qq", 128, 64)
        self.check("ct-weight-shape-lies", c, [Q + ".weight_shape", "[1] = 64"])

        c = Checkpoint("ct-w4a16-g128")
        c.ct_weights()["num_bits"] = 3
        self.check("ct-3-bits", c, ["config_groups.group_0.weights.num_bits", "is 3"])

        c = Checkpoint("ct-w4a16-g128")
        c.ct_weights()["symmetric"] = False
        self.check("ct-asym-without-zero-points", c, ["missing tensor " + Q + ".weight_zero_point"])

        c = Checkpoint("ct-w4a16-g128")
        c.ct_weights()["group_size"] = 48
        self.check("ct-group-size-48", c, ["group_size 48", "does not divide"])

        c = Checkpoint("ct-w4a16-g128")
        del c.tensors[Q + ".weight_shape"]
        self.check("ct-missing-weight-shape", c, ["missing tensor " + Q + ".weight_shape"])

        c = Checkpoint("ct-w8a16-channel")
        c.reshape(Q + ".weight_scale", "F32", [128, 2])
        self.check("ct-w8-scale-shape", c, [Q + ".weight_scale", "shape [128, 2]", "expected [128, 1]"])

        c = Checkpoint("ct-w8a16-channel")
        c.reshape(DOWN + ".weight_packed", "F32", [128, 96])
        self.check("ct-w8-packed-dtype", c, [DOWN + ".weight_packed", "dtype F32"])

        c = Checkpoint("ct-w8a16-channel")
        c.reshape(Q + ".weight_scale", "I32", [128, 1])
        self.check("ct-w8-scale-dtype", c, [Q + ".weight_scale", "dtype I32"])

    def test_fp8(self):
        c = Checkpoint("ct-fp8-dynamic")
        c.reshape(Q + ".weight", "F16", [128, 128])
        self.check("fp8-weight-dtype", c, [Q + ".weight", "dtype F16", "F8_E4M3"])

        c = Checkpoint("ct-fp8-dynamic")
        del c.tensors[DOWN + ".weight_scale"]
        self.check("fp8-missing-scale", c, ["missing tensor " + DOWN + ".weight_scale"])

        c = Checkpoint("ct-fp8-dynamic")
        c.tensors[Q + ".weight"][2][5] = 0xFF  # -NaN in e4m3fn
        self.check("fp8-nan-code", c, [Q, "FP8 code at [0, 5] is NaN"])

        c = Checkpoint("ct-fp8-dynamic")
        c.truncate_by = 4096  # the file ends inside its last tensor
        self.check("fp8-truncated", c, ["model.safetensors", ".weight: data_offsets", "outside the file"])

        # The same errors from `generate`, which loads before anything else.
        c = Checkpoint("ct-fp8-dynamic")
        del c.tensors[Q + ".weight_scale"]
        self.check("fp8-generate", c, ["missing tensor " + Q + ".weight_scale"],
                   command=("generate", "--prompt-ids", "1,2", "--max-tokens", "1"))

    def test_gguf_kquant(self):
        with open(data("models", "gguf-kquant", "kq-256-Q4_K_M.gguf"), "rb") as f:
            original = f.read()
        infos, data_start = gguf_tensor_infos(original)
        q = "blk.0.attn_q.weight"
        at, dims, ggml_type, offset = infos[q]
        self.assertEqual((dims, ggml_type), ([256, 256], 12))  # Q4_K [256, 256]

        def write(label, raw):
            path = self.new_dir(label + ".gguf")
            with open(path, "wb") as f:
                f.write(raw)
            return path

        with self.subTest("gguf-truncated"):
            self.assert_one_line_error(write("gguf-truncated", original[:len(original) - 10000]),
                                       ["tensor blk.", "outside the file"])

        raw = bytearray(original)
        struct.pack_into("<I", raw, at + 4 + 8 * len(dims), 99)  # no such ggml type
        with self.subTest("gguf-unknown-type"):
            self.assert_one_line_error(write("gguf-unknown-type", bytes(raw)), [q, "99"])

        raw = bytearray(original)
        struct.pack_into("<Q", raw, at + 4 + 8, 128)  # [256, 128]: rows the config's heads do not have
        with self.subTest("gguf-shape"):
            self.assert_one_line_error(write("gguf-shape", bytes(raw)), [q, "Q4_K [128, 256]", "wrong type or shape"])

        raw = bytearray(original)
        struct.pack_into("<H", raw, data_start + offset, 0x7E00)  # the first super-block's d: NaN
        with self.subTest("gguf-nan-scale"):
            self.assert_one_line_error(write("gguf-nan-scale", bytes(raw)), [q, "not finite"])


if __name__ == "__main__":
    pagoda_cli.main()
