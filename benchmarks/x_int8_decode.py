"""The 1B-shape decode with and without x_int8 (QuantizedLlama's option, docs/quantized.md) for the formats whose
wide GEMVs round x when asked (Q4_0, Q4_1, Q5_K_M's Q5_K): `python -m wgraph bench --only quant`'s model rows for
those formats alone, on a GPU (run from the project root):

    python benchmarks/x_int8_decode.py [out.json]

Prints the rows (tokens/s, the fraction of the copy bandwidth, how many GEMVs of a step round x) and writes them
as JSON where asked."""
import json
import sys

if __name__ == "__main__":   # the quantizer's worker processes import this file again
    import wgraph as wg
    from wgraph.bench import gemv, quant

    quant.MODEL_TYPES = ("Q4_0", "Q4_1", "Q5_K_M")
    quant.MODEL_X_INT8 = quant.MODEL_TYPES
    dev = wg.default_device()
    copy = gemv.copy_bandwidth(dev, gemv.copy_bytes(dev.caps, "full"))
    rows = quant.bench_quant_models(dev, big=True, copy_gbps=copy["gbps"], use_torch=False, progress=print)
    print(quant.model_table(rows))
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as f:
            json.dump(rows, f, indent=1, default=str)
