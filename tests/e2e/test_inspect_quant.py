"""`pagoda inspect` of quantized checkpoints: each weight's on-disk format beside the internal form it was
converted to at load ("awq gemm g128 -> int4-group g128 +zeros"), as for GGUF block types ("Q4_K -> ..."), and
its bytes in memory, for the small reference checkpoints of models/quant/ and models/gguf-kquant/."""
import os
import re
import tempfile
import unittest

import pagoda_cli
from pagoda_cli import run
from test_quant_corrupted import Checkpoint

ROW = re.compile(r"^  (\S+)\s+(.+?)\s+(\[[\d, ]+\])\s+(\d+) bytes\s+([\d.]+) bits/weight")


def data(*parts):
    return os.path.join(pagoda_cli.ARGS.data, *parts)


def layer_rows(model):
    """{checkpoint tensor name: (format, shape, bytes)} of `inspect --layers`."""
    out = run("inspect", model, "--layers").stdout
    rows = {}
    for line in out.split("weights by tensor:\n", 1)[1].splitlines():
        m = ROW.match(line)
        if m:
            rows[m.group(1)] = (m.group(2), m.group(3), int(m.group(4)))
    return out, rows


# q_proj is [128, 128] (N = K = 128) in tinystories-656k. Its bytes in memory: codes (K/2 a row for 4 bits, K for 8),
# F32 scales and U8 zero points [N, groups], and the I32 g_idx [K] only when act order makes it differ from k / G.
N = K = 128


def int4_bytes(groups, g_idx=False):
    return N * K // 2 + N * groups * 4 + N * groups + (K * 4 if g_idx else 0)


Q = "model.layers.0.self_attn.q_proj.weight"
EXPECTED = {  # variant: (q_proj's format, its bytes)
    "awq-w4-g128-gemm": ("awq gemm g128 -> int4-group g128 +zeros", int4_bytes(1)),
    "awq-w4-g32-gemm": ("awq gemm g32 -> int4-group g32 +zeros", int4_bytes(4)),
    "gptq-w4-g128-sym": ("gptq v1 4-bit sym g128 -> int4-group g128 +zeros", int4_bytes(1)),
    "gptq-w4-g64-asym-descact": ("gptq v1 4-bit asym act-order g64 -> int4-group g64 +zeros", int4_bytes(2, True)),
    "ct-w4a16-g128": ("compressed-tensors pack-quantized 4-bit g128 -> int4-group g128 +zeros", int4_bytes(1)),
    # symmetric int8 keeps no zero points
    "ct-w8a16-channel": ("compressed-tensors pack-quantized 8-bit per-channel -> int8 g128", N * K + N * 4),
    "ct-fp8-dynamic": ("compressed-tensors float-quantized fp8 per-channel -> fp8-channel g128 W8A8 (fp8-per-token)",
                       N * K + N * 4),
}


class InspectQuantized(unittest.TestCase):
    def test_gptq_act_order_row(self):
        # One row in full: 8192 bytes of codes, 1024 of scales, 256 of zero points, 512 of g_idx.
        _, rows = layer_rows(data("models", "quant", "gptq-w4-g64-asym-descact"))
        self.assertEqual(rows[Q], ("gptq v1 4-bit asym act-order g64 -> int4-group g64 +zeros", "[128, 128]", 9984))
        self.assertEqual(rows["model.layers.0.input_layernorm.weight"], ("F32", "[128]", 512))
        self.assertEqual(rows["model.embed_tokens.weight"], ("F32", "[2048, 128]", 2048 * 128 * 4))

    def test_every_reference_variant(self):
        for variant, (fmt, nbytes) in EXPECTED.items():
            with self.subTest(variant):
                out, rows = layer_rows(data("models", "quant", variant))
                self.assertEqual(rows[Q], (fmt, "[128, 128]", nbytes))
                # Every linear of the 2 layers has the same on-disk format; the summary groups them under it.
                source = fmt.split(" -> ")[0]
                self.assertEqual(sum(f.startswith(source + " -> ") for f, _, _ in rows.values()), 14)
                self.assertRegex(out, r"\n  " + re.escape(source) + r" -> .* params ")

    def test_formats_named_by_other_configs(self):
        # gptq_v2 (zero points stored as they are), and fp8 (transformers' Fp8Config) with one scale per tensor.
        with tempfile.TemporaryDirectory() as tmp:
            c = Checkpoint("gptq-w4-g64-asym-descact")
            c.quant()["checkpoint_format"] = "gptq_v2"
            _, rows = layer_rows(c.write(os.path.join(tmp, "v2")))
            self.assertEqual(rows[Q][0], "gptq v2 4-bit asym act-order g64 -> int4-group g64 +zeros")

            c = Checkpoint("ct-fp8-dynamic")
            c.config["quantization_config"] = {"quant_method": "fp8", "activation_scheme": "dynamic",
                                               "modules_to_not_convert": ["lm_head"]}
            for name, entry in c.tensors.items():
                if name.endswith(".weight_scale"):  # [N, 1] -> [1]: row 0's scale for the whole tensor
                    entry[1], entry[2] = [1], entry[2][:4]
            _, rows = layer_rows(c.write(os.path.join(tmp, "fp8")))
            self.assertEqual(rows[Q], ("fp8 per-tensor -> fp8-channel g128 W8A8 (fp8-per-token)", "[128, 128]",
                                       N * K + N * 4))

    def test_gguf_rows_keep_the_block_type(self):
        _, rows = layer_rows(data("models", "gguf-kquant", "kq-256-Q4_K_M.gguf"))
        # [256, 256] Q4_K: U8 codes 256 x 128, F32 scales and offsets 256 x 8 groups of 32 each.
        self.assertEqual(rows["blk.0.attn_q.weight"],
                         ("Q4_K -> int4-group g32 +offsets (CPU: int8 activation blocks of 256)", "[256, 256]",
                          256 * 128 + 2 * 256 * 8 * 4))
        self.assertEqual(rows["blk.1.ffn_down.weight"][0], "Q6_K -> int8 g16 (CPU: int8 activation blocks of 256)")


if __name__ == "__main__":
    pagoda_cli.main()
