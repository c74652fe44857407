"""`python -m wgraph generate PATH --prompt "..." [--chat] [--system ...]`: load a Hugging Face directory or a GGUF
file and stream the generated text to stdout as it decodes, then the speed on stderr. With --prompt-ids instead:
token ids in, ids out. What it is doing (loading, compiling, the speed) goes to stderr: a progress bar on a
terminal, plain lines otherwise."""

from __future__ import annotations

import argparse
import os
import sys
import time

from wgraph import progress
from wgraph.args import F32_MAX, U32_MAX, U64_MAX, integer, real
from wgraph.cli_format import DefaultsFormatter
from wgraph.errors import LimitError, ShapeError, WgraphError
from wgraph.models.config import MAX_SEQ


def _digits(text: str) -> int:
    """A number written in ASCII digits (int() also took '1_0' as 10 and a fullwidth '４' as 4); ValueError else."""
    t = text.strip()
    if not (t.isascii() and t.isdigit()):
        raise ValueError(text)
    return int(t)


def _ids(text: str) -> list[int]:
    """Comma-separated ids; an empty one ('1,,2', '') is refused: an empty --stop-ids (an unset shell variable) turned
    the tokenizer's eos stop off without a word. `none` is --stop-ids' own way to stop at no id."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"expected at least one token id, got {text!r}")
    try:
        return [integer("generate", "id", _digits(t)) for t in text.split(",")]
    except (ValueError, WgraphError):
        raise argparse.ArgumentTypeError(f"expected comma-separated integers in [0, {U32_MAX}], got {text!r}") from None


def _stop_ids(text: str) -> list[int]:
    return [] if text.strip() == "none" else _ids(text)


# The numeric options are checked as they are parsed, by the rules of the Python calls they go to (args.py), with
# the text as typed: a bad one was refused only after the device was opened and the weights read, as
# 'error: generate: temperature=inf must be ...' (naming the Python argument, and 1e400 shown as inf).
def _integer(lo: int, hi: int):
    """An argparse type: an integer in [lo, hi] (wgraph.args.integer's test)."""
    def parse(text: str) -> int:
        try:
            return integer("generate", "option", _digits(text), lo, hi)
        except (ValueError, WgraphError):
            raise argparse.ArgumentTypeError(f"expected an integer in [{lo}, {hi}], got {text!r}") from None
    return parse


def _real(lo: float, hi: float, *, open_lo: bool = False):
    """An argparse type: a finite real in [lo, hi] ((lo, hi] with open_lo; wgraph.args.real's test): NaN, +-inf and
    1e400 are refused."""
    def parse(text: str) -> float:
        try:
            return real("generate", "option", float(text), lo, hi, open_lo=open_lo) + 0.0   # -0.0 is 0.0
        except (ValueError, WgraphError):
            raise argparse.ArgumentTypeError(f"expected a finite real in {'(' if open_lo else '['}{lo:.8g}, "
                                             f"{hi:.8g}], got {text!r}") from None
    return parse


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m wgraph generate", description=__doc__,
                                formatter_class=DefaultsFormatter)
    p.add_argument("path", help="a Hugging Face directory (config.json, *.safetensors, tokenizer.json) or a .gguf file")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--prompt", help="the prompt text (needs a tokenizer: tokenizer.json or the GGUF's vocabulary)")
    what.add_argument("--prompt-ids", type=_ids,
                      help="the prompt as token ids, e.g. 1,2,3 (prints ids, not text)")
    p.add_argument("--chat", action="store_true", help="render --prompt as a user message with the chat template")
    p.add_argument("--system", help="a system message before the prompt (with --chat)")
    p.add_argument("--max-new-tokens", type=_integer(0, MAX_SEQ), default=32, help="tokens to generate at most")
    p.add_argument("--dtype", choices=("f16", "f32"), help="weight dtype (default: a llama GGUF file's matrices in "
                   "the block formats wgraph computes on stay blocks, the rest f32; otherwise f16 where the device has "
                   "shader-f16, else f32); a dtype dequantizes a GGUF file to it")
    p.add_argument("--x-int8", action="store_true", help="a GGUF file's block matrices: round x to int8 per 32 "
                   "weights for their integer-dot GEMVs, as llama.cpp does (outputs move a little; docs/quantized.md)")
    p.add_argument("--max-seq", type=_integer(2, MAX_SEQ), help="KV cache positions (default: the prompt's tokens "
                   "plus --max-new-tokens where that is within min(max_position_embeddings, 2048), else that)")
    p.add_argument("--temperature", type=_real(0.0, F32_MAX), default=0.0,
                   help="0 is greedy; > 0 samples on the GPU")
    # the sampling options' defaults are set after the parse (SAMPLING): given with --temperature 0 they are refused,
    # where they were ignored without a word
    p.add_argument("--top-k", type=_integer(0, U32_MAX),
                   help="keep the k most likely ids when sampling (0: all; default 0)")
    p.add_argument("--top-p", type=_real(0.0, 1.0, open_lo=True),
                   help="keep the smallest set of ids with this mass when sampling (default 1)")
    p.add_argument("--seed", type=_integer(0, U64_MAX),
                   help="sampling seed: the same seed gives the same text (default 0)")
    p.add_argument("--stop-ids", type=_stop_ids, help="stop at the first of these ids, or `none` (default: the "
                                                      "tokenizer's eos ids with --prompt, none with --prompt-ids)")
    p.add_argument("--in-flight", type=_integer(1, MAX_SEQ), default=8,
                   help="decode steps submitted ahead of the GPU")
    p.add_argument("--read-every", type=_integer(1, MAX_SEQ), default=4,
                   help="read the new ids back (and print them) every N tokens")
    return p


def main(argv: list[str]) -> int:
    try:
        code = _main(argv)
        sys.stdout.flush()   # here, where a reader gone away is caught, not at the exit
        return code
    except BrokenPipeError:   # stdout's reader went away (`| head`): stop generating, without a traceback
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())   # the exit's flush of stdout would fail too
        return 1


SAMPLING = {"top_k": 0, "top_p": 1.0, "seed": 0}   # the sampling options' defaults


def _main(argv: list[str]) -> int:
    p = parser()
    args = p.parse_args(argv)
    given = [f"--{k.replace('_', '-')}" for k in SAMPLING if getattr(args, k) is not None]
    if given and args.temperature == 0:
        p.error(f"{', '.join(given)} only shape sampling, and --temperature 0 is greedy: give a temperature > 0 or "
                f"drop them")
    for k, default in SAMPLING.items():
        if getattr(args, k) is None:
            setattr(args, k, default)
    if (args.system is not None or args.chat) and args.prompt is None:   # ids are the prompt as it is
        p.error("--chat and --system need --prompt (with --prompt-ids the ids are the whole prompt)")
    if args.system is not None and not args.chat:   # a plain prompt has no place for it
        p.error("--system needs --chat (the system message is a turn of the chat template)")
    import wgraph as wg
    from wgraph.models import open_pretrained
    from wgraph.models import text
    from wgraph.models.pretrained import checkpoint_path

    try:   # a missing path: said before the device starts and the loading line promises a compile
        checkpoint_path("generate", args.path)
    except wg.WgraphError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    dev = wg.default_device()
    try:
        print(f"loading {args.path} on {dev.caps.adapter_name}: compiling the decode program, then reading the "
              f"weights", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        files = open_pretrained(args.path)   # the config and tokenizer, read once for the cache's size and the model
        ids = None   # the prompt's ids, made once: they size the cache and start the generation
        if args.prompt is not None:   # no tokenizer: the text API's error, before the weights are read
            ids = text.prompt_ids(text.tokenizer_of(files, "generate"), args.prompt, chat=args.chat,
                                  system=args.system, where="generate")
        positions = cache_positions(args, files, ids)
        check_room(args, files, ids, positions)   # before the weights are read, naming the options
        model = files.load(dev, dtype=args.dtype, max_seq=positions, x_int8=args.x_int8)
        dtype = weights_label(model)
        print(f"loaded in {time.perf_counter() - t0:.1f} s ({model.config.num_hidden_layers} layers, "
              f"{model.weight_bytes / 2**20:.1f} MiB of weights, a KV cache of {model.max_seq} positions); the first "
              f"tokens also compile shaders", file=sys.stderr, flush=True)
        if args.prompt is None:
            return _generate_ids(model, args, dev, dtype)
        req = text.request_for_ids(model, ids, args.max_new_tokens, temperature=args.temperature, top_k=args.top_k,
                                   top_p=args.top_p, seed=args.seed, stop_ids=args.stop_ids,
                                   read_every=args.read_every, in_flight=args.in_flight, where="generate")
        for piece in text.stream(model, req):
            sys.stdout.write(_writable(piece, sys.stdout))
            sys.stdout.flush()
    except wg.WgraphError as e:
        print(f"\nerror: {e}", file=sys.stderr)
        return 1
    st = model.last_stats
    print(file=sys.stdout)
    if st["tokens"] == 0:   # max_new_tokens 0: the text API ran no prefill and no step (its stats are zeros)
        print(f"no new tokens asked for (--max-new-tokens 0): nothing generated, no prefill of the "
              f"{st['prompt_tokens']} prompt tokens ({st['submits']} submits)", file=sys.stderr)
        return 0
    steps = st["tokens"] - 1  # prefill chose the first new token
    rate = f"{steps / st['decode_seconds']:.2f} tokens/s" if steps and st["decode_seconds"] > 0 else "no decode step"
    print(f"{st['tokens']} tokens: prefill of {st['prompt_tokens']} tokens {st['prefill_seconds']:.3f} s, then "
          f"{rate} ({st['seconds']:.3f} s in all) on {dev.caps.adapter_name} ({dtype} weights), "
          f"{st['submits']} submits, {st['readbacks']} readbacks", file=sys.stderr)
    return 0


def _writable(piece: str, stream) -> str:
    """`piece` as `stream` can write it: a character its encoding lacks as a backslash escape, as Python writes
    stderr. The text is any Unicode; on an ASCII stdout (PYTHONIOENCODING=ascii, a cp1252 console on Windows) the
    first such piece raised UnicodeEncodeError with a traceback and cut the generation off."""
    encoding = getattr(stream, "encoding", None) or "utf-8"
    try:
        piece.encode(encoding)
        return piece
    except UnicodeEncodeError:
        return piece.encode(encoding, "backslashreplace").decode(encoding)


def cache_positions(args, files, ids: list[int] | None) -> int | None:
    """The KV cache's positions for this one generation: --max-seq where given; else the prompt's tokens plus
    --max-new-tokens where that is within the default cache (the config's max_position_embeddings, up to
    DEFAULT_MAX_SEQ); else None, the default (a request beyond it is refused by the model, naming both).
    files: the opened checkpoint (open_pretrained), for its config. ids: --prompt's ids (None: no tokenizer).
    A cache no larger than the request holds fewer bytes, and the history read back at the end is max_seq * 4
    bytes (decode takes the one-pass attention kernel for the first 512 positions whatever the cache: Llama's
    short decode program, docs/models.md)."""
    from wgraph.models.llama import DEFAULT_MAX_SEQ

    if args.max_seq is not None:
        return args.max_seq
    if args.prompt_ids is not None:
        prompt = len(args.prompt_ids)
    elif ids is not None:
        prompt = len(ids)
    else:
        return None   # the text API says there is no tokenizer
    wanted = max(2, prompt + max(args.max_new_tokens, 0))
    return wanted if wanted <= min(files.config.max_position_embeddings, DEFAULT_MAX_SEQ) else None


def check_room(args, files, ids: list[int] | None, positions: int | None) -> None:
    """ShapeError where --prompt makes no ids; LimitError where --prompt-ids or --stop-ids hold an id past the
    vocabulary, or the prompt and --max-new-tokens do not fit the KV cache of `positions` (cache_positions; None:
    the model's default, min(max_position_embeddings, DEFAULT_MAX_SEQ)). The model refused these only once every
    weight was read, naming the Python arguments (the cache saying 'load the model with a larger max_seq=')."""
    from wgraph.models.llama import DEFAULT_MAX_SEQ

    if ids is not None and not ids:   # a tokenizer that adds no BOS (a qwen2 GGUF's) makes no ids of --prompt ""
        raise ShapeError(f"generate: --prompt {args.prompt!r} encodes to no tokens (this tokenizer adds no BOS); "
                         f"give a prompt with text")
    vocab = files.config.vocab_size   # ids past it were refused only once every weight was read
    for option, given in (("--prompt-ids", args.prompt_ids), ("--stop-ids", args.stop_ids)):
        past = [i for i in given or () if i >= vocab]
        if past:
            raise LimitError(f"generate: {option} holds id {past[0]}, past the model's vocabulary of {vocab} ids "
                             f"(0 to {vocab - 1})")
    prompt = len(args.prompt_ids) if ids is None else len(ids)
    n = args.max_new_tokens
    room = positions if positions is not None else min(files.config.max_position_embeddings, DEFAULT_MAX_SEQ)
    if prompt + n > room:
        whose = ("--max-seq" if args.max_seq is not None
                 else f"the default, min(max_position_embeddings, {DEFAULT_MAX_SEQ})")
        raise LimitError(f"generate: {prompt} prompt + {n} new tokens exceed the KV cache of {room} positions "
                         f"({whose}): give --max-seq {prompt + n} or more, or fewer --max-new-tokens")


def weights_label(model) -> str:
    """What a model's weights are, for the messages: its dtype, or its GGML block formats and the rest's dtype."""
    blocks = model.block_formats
    x = ""
    if model.x_int8:
        rounding = model.x_int8_gemvs
        x = (f", x rounded to int8 in {rounding} GEMV(s) of a step" if rounding
             else ", x_int8 asked: no GEMV of this model rounds x (none is faster for its formats and shapes)")
    return f"{'/'.join(blocks)} blocks{x}, the rest {model.dtype}" if blocks else model.dtype


def _generate_ids(model, args, dev, dtype) -> int:
    n = args.max_new_tokens
    with progress.bar(n, "generating", "tokens", lines=True) as shown:   # a bar on a terminal, else lines

        def tell(done: int, seconds: float):
            shown.update(done - told[0])
            told[0] = done

        told = [0]
        ids = model.generate(args.prompt_ids, n, temperature=args.temperature, top_k=args.top_k, top_p=args.top_p,
                             seed=args.seed, stop_ids=args.stop_ids or (), in_flight=args.in_flight,
                             read_every=args.read_every, progress=tell)
    st = model.last_stats
    print(f"{len(ids)} tokens in {st['seconds']:.3f} s on {dev.caps.adapter_name} ({dtype} weights), "
          f"{st['submits']} submits, {st['readbacks']} readbacks", file=sys.stderr)
    print(",".join(map(str, ids)))
    return 0
