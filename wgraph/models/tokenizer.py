"""`Tokenizer`: text <-> token ids through Hugging Face's `tokenizers` (Rust, no torch), from a checkpoint
directory's tokenizer.json (+ tokenizer_config.json, chat_template.jinja, generation_config.json) or from a GGUF
file's vocabulary, with the special tokens, BOS/EOS handling and chat template transformers 5 would use; and
`StreamDecoder`, which turns ids into text pieces as they come without ever emitting half a character."""

from __future__ import annotations

import contextlib
import functools
import string
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tokenizers import AddedToken, processors
from tokenizers import Tokenizer as Backend

import os

from wgraph import args
from wgraph.errors import ArgumentError, CheckpointError
from wgraph.host_arrays import host_ids
from wgraph.models.chat_template import ChatTemplate
from wgraph.models.files import kind, read_json, read_text
from wgraph.models.gguf import GGUFFile, open_split
from wgraph.models.gguf_tokenizer import gguf_tokenizer_parts

if TYPE_CHECKING:
    from wgraph.api_types import Ids

MAX_TOKENIZER_BYTES = 128 << 20  # tokenizer.json of a 256k vocabulary is ~35 MB
MAX_CONFIG_BYTES = 16 << 20
SPECIAL_NAMES = ("bos_token", "eos_token", "unk_token", "pad_token")
# transformers' apply_chat_template options that change its output and that wgraph does not take: passed to wgraph
# they would become template variables no template reads, and the output would silently be another one
TRANSFORMERS_ONLY = ("chat_template", "continue_final_message", "return_assistant_tokens_mask", "return_dict",
                     "return_tensors", "padding", "truncation", "max_length", "tokenizer_kwargs",
                     "sanitize_control_tokens")
HEX = frozenset(string.hexdigits)




def _read_json(path: Path, limit: int):
    """A JSON file of at most `limit` bytes, or None when it does not exist."""
    if not path.is_file():
        return None
    return read_json(path, limit)


def _token_string(value, where: str) -> str | None:
    """A special token in tokenizer_config.json: a string, or an AddedToken dict with "content"."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return value["content"]
    raise CheckpointError(f"{where} must be a string or an object with 'content', got {value!r}")


def _path(fn: str, name: str, value, more: str = ""):
    """A file or directory path argument: a str or an os.PathLike (ArgumentError otherwise)."""
    if isinstance(value, (str, os.PathLike)):
        return value
    raise args.fail(fn, name, value, f"a path (str or os.PathLike){' ' + more if more else ''}")


def unicode_text(fn: str, text, name: str = "text") -> str:
    """A str that is Unicode text: a lone surrogate (a shell argument of invalid UTF-8 arrives as one) cannot be
    encoded to UTF-8, which the tokenizer reads. `name`: the argument, for the message."""
    text = args.text(fn, name, text)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ArgumentError(f"{fn}: {name} holds {text[e.start:e.end]!r} at {e.start}, not Unicode text (a lone "
                            f"surrogate: bytes that were not UTF-8?)") from None
    return text


@contextlib.contextmanager
def _tokenizers_failures(what: str):
    """tokenizers failing on what a file holds (a malformed file, a split regex that runs past Oniguruma's retry
    limit) as a CheckpointError saying `what`: its bare Exception, and a Rust panic, which reaches Python as pyo3's
    PanicException, a BaseException that `except Exception` (and the command line) let through."""
    try:
        yield
    except CheckpointError:
        raise
    except BaseException as e:
        if not isinstance(e, Exception) and type(e).__name__ != "PanicException":
            raise   # KeyboardInterrupt, SystemExit
        kind = "" if type(e) is Exception else f"{type(e).__name__}: "   # tokenizers' own errors are bare
        raise CheckpointError(f"{what}: {kind}{e}") from None


def _eos_ids(value, where: str) -> list[int]:
    ids = value if isinstance(value, list) else [value]
    if not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in ids):
        raise CheckpointError(f"{where}: eos_token_id={value!r} must be a token id or a list of them")
    return ids


class Tokenizer:
    """Encode and decode text, render chat templates. Build with `from_directory` or `from_gguf`."""

    def __init__(self, backend: Backend, *, special: dict[str, str | None], add_bos: bool | None = None,
                 add_eos: bool | None = None, chat_template: ChatTemplate | None = None,
                 stop_ids: list[int] | None = None, clean_up_spaces: bool = False, source: str = "the tokenizer"):
        self.backend, self.source = backend, source  # source: the file, for the errors
        self.special = {k: v for k, v in special.items() if v is not None}
        # as transformers: special tokens the vocabulary lacks are added (special, matched whole in the text)
        added = {t.content for t in backend.get_added_tokens_decoder().values()}
        missing = [t for t in self.special.values() if t not in added]
        if missing:
            backend.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in dict.fromkeys(missing)])
        if add_bos is not None or add_eos is not None or backend.post_processor is None:
            self._set_post_processor(bool(add_bos), bool(add_eos))
        self.chat_template = chat_template
        eos = self.token_id(self.special["eos_token"]) if "eos_token" in self.special else None
        self.stop_ids = sorted(set(stop_ids if stop_ids else [] if eos is None else [eos]))
        past = [i for i in self.stop_ids if i >= self.vocab_size]
        if past:   # a stop id outside the vocabulary is never generated: generation would never stop on it
            raise CheckpointError(f"eos_token_id {past[0]} is outside the tokenizer's vocabulary of {self.vocab_size} "
                                  f"tokens")
        # transformers skips the clean-up for BPE models: it would strip real spaces before punctuation
        self.clean_up_spaces = clean_up_spaces and type(backend.model).__name__ != "BPE"

    def _set_post_processor(self, add_bos: bool, add_eos: bool) -> None:
        """BOS/EOS around every encoded text, as transformers' update_post_processor builds it. The template names
        the tokens by fixed placeholders, never by their text: a token spelled "$A", or holding a space or a colon,
        would be parsed as template syntax (a "$A" BOS repeated the whole text)."""
        bos, eos = self.special.get("bos_token", ""), self.special.get("eos_token", "")
        add_bos, add_eos = add_bos and bool(bos), add_eos and bool(eos)

        def pieces(seq: str, type_id: int) -> list[str]:
            return ((["wgraph_bos" + f":{type_id}"] if add_bos else []) + [f"{seq}:{type_id}"]
                    + (["wgraph_eos" + f":{type_id}"] if add_eos else []))

        specials = [{"id": name, "ids": [self.backend.token_to_id(text)], "tokens": [text]}
                    for name, text, on in (("wgraph_bos", bos, add_bos), ("wgraph_eos", eos, add_eos)) if on]
        self.backend.post_processor = processors.TemplateProcessing(
            single=pieces("$A", 0), pair=pieces("$A", 0) + pieces("$B", 1), special_tokens=specials)

    # ---- construction ----

    @classmethod
    def from_directory(cls, path: str | os.PathLike[str]) -> Tokenizer:
        """tokenizer.json with tokenizer_config.json, chat_template.jinja (and additional_chat_templates/*.jinja)
        and the eos ids of generation_config.json / config.json, from a Hugging Face checkpoint directory.

        path: the checkpoint directory.
        """
        root = Path(_path("Tokenizer.from_directory", "path", path))
        tj = root / "tokenizer.json"
        if kind(tj) != "file":
            raise CheckpointError(f"{root}: no tokenizer.json (wgraph reads tokenizers in that format only)")
        text = read_text(tj, MAX_TOKENIZER_BYTES)
        with _tokenizers_failures(f"{tj}: not a tokenizer.json that `tokenizers` reads"):
            backend = Backend.from_str(text)
        config = _read_json(root / "tokenizer_config.json", MAX_CONFIG_BYTES) or {}
        if not isinstance(config, dict):
            raise CheckpointError(f"{root / 'tokenizer_config.json'} must hold a JSON object")
        special = {k: _token_string(config.get(k), f"tokenizer_config.json: {k}") for k in SPECIAL_NAMES}
        template = _directory_template(root, config)
        stop_ids = None
        for name in ("generation_config.json", "config.json"):  # transformers' generate reads them in this order
            data = _read_json(root / name, MAX_CONFIG_BYTES)
            if isinstance(data, dict) and data.get("eos_token_id") is not None:
                stop_ids = _eos_ids(data["eos_token_id"], name)
                break
        clean_up = config.get("clean_up_tokenization_spaces", False)
        if not isinstance(clean_up, bool):
            raise CheckpointError(f"tokenizer_config.json: clean_up_tokenization_spaces={clean_up!r} must be a bool")
        # with a tokenizer.json, transformers 5 drops tokenizer_config's add_bos_token/add_eos_token: the file's
        # post-processor decides (add_bos=None keeps it)
        return cls(backend, special=special, chat_template=template, stop_ids=stop_ids, clean_up_spaces=clean_up,
                   source=str(tj))

    @classmethod
    def from_gguf(cls, gguf: str | os.PathLike[str] | GGUFFile) -> Tokenizer:
        """The tokenizer of a GGUF file (a path or a parsed GGUFFile).

        gguf: the .gguf file's path (any shard of a split model: the first holds the tokenizer), or a parsed GGUFFile.
        """
        # open_split: a split model's later shards hold no tokenizer metadata (the first shard's is the model's)
        f = gguf if isinstance(gguf, GGUFFile) else open_split(_path("Tokenizer.from_gguf", "gguf", gguf,
                                                                     "or a GGUFFile"))
        parts = gguf_tokenizer_parts(f)
        template = parts["chat_template"]
        return cls(parts["backend"], special=parts["special"], add_bos=parts["add_bos"], add_eos=parts["add_eos"],
                   chat_template=None if template is None else ChatTemplate.from_value(
                       template, f"GGUF file {f.path.name}: tokenizer.chat_template"),
                   stop_ids=parts["stop_ids"], source=f"GGUF file {f.path.name}")

    # ---- use ----

    @property
    def vocab_size(self) -> int:
        """The number of token ids, added (special) tokens included."""
        return self.backend.get_vocab_size(with_added_tokens=True)

    def token_id(self, token: str) -> int | None:
        """The id of `token` (a token string of the vocabulary), or None.

        token: a token string of the vocabulary.
        """
        return self.backend.token_to_id(args.text("Tokenizer.token_id", "token", token))

    def encode(self, text: str, *, add_special_tokens: bool = True) -> list[int]:
        """Token ids of `text`; add_special_tokens adds BOS/EOS as the tokenizer's files say.

        text: the text.
        add_special_tokens: add BOS/EOS as the tokenizer's files say.
        """
        text = unicode_text("Tokenizer.encode", text)
        add_special_tokens = args.flag("Tokenizer.encode", "add_special_tokens", add_special_tokens)
        with self._failures("encode"):
            return self.backend.encode(text, add_special_tokens=add_special_tokens).ids

    def decode(self, ids: Ids, *, skip_special_tokens: bool = True) -> str:
        """The text of `ids` (special tokens left out unless skip_special_tokens=False).

        ids: token ids (a list, tuple or numpy integer array).
        skip_special_tokens: leave special tokens out of the text.
        """
        ids = self.check_ids(ids, "Tokenizer.decode")
        skip_special_tokens = args.flag("Tokenizer.decode", "skip_special_tokens", skip_special_tokens)
        with self._failures("decode"):
            text = self.backend.decode(ids, skip_special_tokens=skip_special_tokens)
        return _clean_up(text) if self.clean_up_spaces else text

    def _failures(self, what: str):
        """A context in which tokenizers failing (a hostile tokenizer.json's regex, a Rust panic) is a CheckpointError
        naming this tokenizer's file; `what` is what was being done ("encode", "decode")."""
        return _tokenizers_failures(f"{self.source}: tokenizers failed to {what}")

    def check_ids(self, ids: Ids, where: str) -> list[int]:
        """`ids` (a list, tuple or numpy integer array) as a list of ints, each an id of the vocabulary: the one
        rule for token ids (host_arrays.host_ids), naming `where`.

        ids: token ids (a list, tuple or numpy integer array).
        where: the caller's name, for the message.
        """
        where = args.text("Tokenizer.check_ids", "where", where)
        arr = host_ids(ids, self.vocab_size, where)
        if arr.ndim > 1:   # decode([[5, 78], [78, 5]]) (a batch's rows) was one text of the rows run together
            raise args.fail(where, "ids", ids, "one sequence of token ids (a list or 1-D array; decode a batch "
                                               "row by row)")
        return arr.reshape(-1).tolist()

    def apply_chat_template(self, messages: list[dict[str, Any]], *, add_generation_prompt: bool = True,
                            template: str | None = None, tokenize: bool = False, **kwargs: Any) -> str | list[int]:
        """The prompt of a conversation as text, or as ids with tokenize=True (no BOS added: templates write it).

        messages: the conversation: a list of {"role": ..., "content": ...} dicts.
        add_generation_prompt: end with the template's opening of an assistant turn.
        template: the name of one of the checkpoint's additional chat templates; None: the default template.
        tokenize: return token ids instead of text.
        kwargs: more template variables (JSON-like values; tools and documents among them); transformers' other
            options (TRANSFORMERS_ONLY) are refused.
        """
        fn = "apply_chat_template"
        for name in TRANSFORMERS_ONLY:
            if name in kwargs:
                how = (f"; wgraph names a template with template= (one of {self.chat_template.names})"
                       if name == "chat_template" and self.chat_template is not None else "")
                raise ArgumentError(f"{fn}: {name}={args.show(kwargs[name])} is an option of transformers' "
                                    f"apply_chat_template that wgraph does not take{how}")
        add_generation_prompt = args.flag(fn, "add_generation_prompt", add_generation_prompt)
        if template is not None:
            template = args.text(fn, "template", template)
        tokenize = args.flag(fn, "tokenize", tokenize)
        if self.chat_template is None:
            raise CheckpointError("apply_chat_template: this tokenizer has no chat template (no chat_template in "
                                  "tokenizer_config.json, no chat_template.jinja, no tokenizer.chat_template)")
        text = self.chat_template.render(messages, add_generation_prompt=add_generation_prompt, template=template,
                                         special_tokens=self.special, **kwargs)
        return self.encode(text, add_special_tokens=False) if tokenize else text

    @functools.cached_property
    def byte_fallback_ids(self) -> frozenset[int]:
        """Ids of the byte-fallback tokens ("<0xE2>"), spelled as tokenizers' ByteFallback decoder reads them."""
        return frozenset(i for t, i in self.backend.get_vocab().items()
                         if len(t) == 6 and t.startswith("<0x") and t.endswith(">") and set(t[3:5]) <= HEX)

    @functools.cached_property
    def special_ids(self) -> frozenset[int]:
        """Ids of the special tokens (what skip_special_tokens leaves out)."""
        return frozenset(i for i, t in self.backend.get_added_tokens_decoder().items() if t.special)

    def stream_decoder(self, *, skip_special_tokens: bool = True) -> StreamDecoder:
        """A StreamDecoder of this tokenizer: text pieces from ids pushed a few at a time.

        skip_special_tokens: leave special tokens out of the pieces.
        """
        return StreamDecoder(self, args.flag("Tokenizer.stream_decoder", "skip_special_tokens", skip_special_tokens))


class StreamDecoder:
    """Text pieces from ids pushed a few at a time. A piece is emitted once the ids decode to more text that does
    not end in U+FFFD (an unfinished UTF-8 sequence of byte tokens); the text of all pieces plus `flush()` equals
    decoding all ids at once. Decodes a window that starts at the last emitted token, so a decoder that strips
    the first token's space treats every window alike (the method of text-generation-inference). A run of
    byte-fallback tokens is decoded as one (all U+FFFD where it is not UTF-8, a valid <0x0A> before it too), so no
    piece ends inside one. A tokenizer that cleans up spaces (`_clean_up`) holds back the text from its last space
    on, which later text may still clean."""

    def __init__(self, tokenizer: Tokenizer, skip_special_tokens: bool = True):
        self.tokenizer, self.skip = tokenizer, skip_special_tokens
        self.ids: list[int] = []
        self.prefix = self.read = 0  # ids[prefix:read] were decoded into the last piece; ids[read:] are pending
        self.held = ""  # decoded text not yet cleaned up and emitted (clean_up_spaces only)

    def _text(self, ids) -> str:
        with self.tokenizer._failures("decode"):
            return self.tokenizer.backend.decode(ids, skip_special_tokens=self.skip)

    def _emit(self, text: str, final: bool) -> str:
        """`text` as the tokenizer's decode gives it: cleaned up where the tokenizer cleans up spaces."""
        if not self.tokenizer.clean_up_spaces:
            return text
        self.held += text
        cut = len(self.held) if final else _clean_up_cut(self.held)
        out, self.held = _clean_up(self.held[:cut]), self.held[cut:]
        return out

    def _in_byte_run(self) -> bool:
        """Whether the ids end in a byte-fallback token (special tokens that are skipped do not end a run)."""
        skipped = self.tokenizer.special_ids if self.skip else frozenset()
        for i in reversed(self.ids[self.prefix:]):
            if i not in skipped:
                return i in self.tokenizer.byte_fallback_ids
        return False

    def push(self, ids) -> str:
        """Add ids; the new text they complete ('' while a character or word is unfinished)."""
        self.ids += self.tokenizer.check_ids(ids, "StreamDecoder.push")
        before = self._text(self.ids[self.prefix:self.read])
        after = self._text(self.ids[self.prefix:])
        if len(after) > len(before) and not after.endswith("\ufffd") and not self._in_byte_run():
            self.prefix, self.read = self.read, len(self.ids)
            return self._emit(after[len(before):], final=False)
        return ""

    def flush(self) -> str:
        """The text still pending at the end (an unfinished character comes out as U+FFFD, as decode gives it)."""
        before = self._text(self.ids[self.prefix:self.read])
        after = self._text(self.ids[self.prefix:])
        self.prefix = self.read = len(self.ids)
        return self._emit(after[len(before):], final=True)


def _directory_template(root: Path, config: dict) -> ChatTemplate | None:
    """chat_template.jinja and additional_chat_templates/*.jinja take priority over tokenizer_config.json's
    chat_template, as in transformers."""
    templates = {}
    if (root / "chat_template.jinja").is_file():
        templates["default"] = read_text(root / "chat_template.jinja", MAX_CONFIG_BYTES)
    extra = root / "additional_chat_templates"
    if extra.is_dir():
        for p in sorted(extra.glob("*.jinja")):
            templates[p.stem] = read_text(p, MAX_CONFIG_BYTES)
    if templates:
        return ChatTemplate(templates, str(root))
    if config.get("chat_template") is not None:
        return ChatTemplate.from_value(config["chat_template"], f"{root / 'tokenizer_config.json'}")
    return None


def _clean_up(text: str) -> str:
    """transformers' clean_up_tokenization (spaces before punctuation and contractions), for non-BPE models."""
    for a, b in ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"), (" 'm", "'m"),
                 (" 's", "'s"), (" 've", "'ve"), (" 're", "'re")):
        text = text.replace(a, b)
    return text


def _clean_up_cut(text: str) -> int:
    """Where `text` may still change once more text follows it through `_clean_up`. Each rewrite starts at a space
    followed by one of " .?!,'n", spans at most 4 characters and deletes spaces only, and one may make another
    (" n ' t" -> " n't" -> "n't"): the cut is the last space, moved back to any such space within the 3
    characters before it, and again. No rewrite spans the cut, so _clean_up(text[:cut]) + _clean_up(rest) ==
    _clean_up(text[:cut] + rest) for any rest that starts at it."""
    cut = text.rfind(" ")
    if cut < 0:
        return len(text)
    while True:
        starts = [j for j in range(max(0, cut - 3), cut) if text[j] == " " and text[j + 1] in _CLEAN_UP_STARTS]
        if not starts:
            return cut
        cut = starts[0]


_CLEAN_UP_STARTS = frozenset(" .?!,'n")  # what follows the space a _clean_up rewrite starts at (or a space)
