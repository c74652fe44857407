"""Reading WGSL source: placeholder substitution, includes, and the facts wgraph derives from a shader
(bindings, uniform struct layout, entry points, workgroup memory). The shader is the source of truth."""

from __future__ import annotations

import ast
import functools
import operator
import re
from pathlib import Path
from typing import Callable

import attrs

from wgraph.errors import RegistryError

_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
_INCLUDE = re.compile(r"^[ \t]*//!include[ \t]+(\S+)[ \t]*$", re.M)
_COMMENT = re.compile(r"//[^\n]*")
# @group(g) @binding(b) or @binding(b) @group(g): WGSL takes attributes in any order
_BINDING = re.compile(
    r"@(?:group\(\s*(\d+)\s*\)\s*@binding\(\s*(\d+)\s*\)|binding\(\s*(\d+)\s*\)\s*@group\(\s*(\d+)\s*\))"
    r"\s*var\s*<\s*(\w+)\s*(?:,\s*(\w+)\s*)?>\s*(\w+)\s*:\s*([^;]+);"
)
_BINDING_ATTRIBUTE = re.compile(r"@binding\s*\(")
_STRUCT = re.compile(r"struct\s+(\w+)\s*\{([^}]*)\}")
# A member's type is a name with an optional template list, nested up to three deep (array<array<vec4<f32>, 2>, 4>):
# the commas inside one are the type's, not the struct's (a lazy match stopped at array<f32's comma)
_TEMPLATE = r"<(?:[^<>]|<(?:[^<>]|<[^<>]*>)*>)*>"
_ARGS = r"\((?:[^()]|\([^()]*\))*\)"   # an attribute's arguments: @align(max(8, 16)) holds a call
_FIELD = re.compile(rf"((?:@\w+(?:\s*{_ARGS})?\s*)*)(\w+)\s*:\s*(\w+\s*(?:{_TEMPLATE})?)\s*(?:,|$)")
_ATTRIBUTE = re.compile(rf"@(\w+)(?:\s*({_ARGS}))?")
# @compute @workgroup_size(...) or @workgroup_size(...) @compute (WGSL takes either order), whose arguments may
# hold a call (max(A, 2u))
_ENTRY = re.compile(rf"@(?:compute\s*@workgroup_size\s*({_ARGS})|workgroup_size\s*({_ARGS})\s*@compute)\s*fn\s+(\w+)")
# A keyword pattern starts with the keyword and checks the word boundary behind it (`(?<!\wconst)` is `\bconst`):
# a leading `\b` keeps `re` from skipping to the literal, 30x slower on the registry's 16 MB of kernel text.
_CONST = re.compile(r"const(?<!\wconst)\s+(\w+)\s*(?::\s*\w+\s*)?=\s*([^;]+);")
_OVERRIDE = re.compile(r"override(?<!\woverride)\s+(\w+)\s*:\s*(\w+)\s*;")
_WORKGROUP_VAR = re.compile(r"var\s*<\s*workgroup\s*>\s*(\w+)\s*:\s*([^;]+);")


def include_reader() -> Callable[[Path, str], str | None]:
    """`read(directory, name)`: the text of the file `name` in `directory`, None where there is none (or
    `name` has a directory part), each file read once. The registry's kernels include the same few dozen files
    6,000 times; a load takes a new reader, so a file edited between loads is read again."""

    @functools.cache
    def read(directory: Path, name: str) -> str | None:
        path = directory / name
        return path.read_text() if Path(name).name == name and path.is_file() else None

    return read


def preprocess(text: str, defines: dict[str, str], include_dir: Path, origin: str,
               read: Callable[[Path, str], str | None] | None = None) -> str:
    """Inline `//!include` lines (whose file name may be a `{{NAME}}`, so a variant's defines choose a
    body: the K/V piece readers), then replace every `{{NAME}}`; an unknown NAME is an error. `read` is an
    `include_reader()` shared by the kernels of one load."""
    seen: set[str] = set()
    read = read or include_reader()

    def substitute(match: re.Match) -> str:
        name = match.group(1)
        if name not in defines:
            raise RegistryError(f"{origin}: placeholder {{{{{name}}}}} has no value; defined: {sorted(defines)}")
        return str(defines[name])

    def inline(match: re.Match) -> str:
        name = _PLACEHOLDER.sub(substitute, match.group(1))
        if name in seen:
            raise RegistryError(f"{origin}: {name} is included twice (or recursively)")
        seen.add(name)
        included = read(include_dir, name)
        if included is None:
            raise RegistryError(f"{origin}: included file {name} does not exist in {include_dir}")
        return _INCLUDE.sub(inline, included) if "//!include" in included else included  # most include none

    text = _PLACEHOLDER.sub(substitute, _INCLUDE.sub(inline, text))
    if "//!" in text:
        _check_directives(text, origin)
    return expand_repeats(text, origin)


_DIRECTIVE_LINE = re.compile(r"^[ \t]*//!.*$", re.M)


def _check_directives(text: str, origin: str) -> None:
    """RegistryError for a line starting `//!` that is no directive as written: `//!include a.wgsl // helpers` (or
    `//!inclde`) stayed a comment, so the file was silently not included and the kernel failed in the shader
    compiler (or ran without it); `//!repeat a` without a count was an '//!end without //!repeat'."""
    for line in _DIRECTIVE_LINE.findall(text):
        if not (_REPEAT_LINE.match(line) or _END_LINE.match(line)):
            raise RegistryError(f"{origin}: {line.strip()!r} is no directive; write `//!include FILE`, "
                                f"`//!repeat VAR COUNT` or `//!end` alone on the line")


# `//!repeat VAR COUNT` ... `//!end`: the lines between are written COUNT times with `$VAR` (or `${VAR}`,
# to write a literal such as `${VAR}u`) replaced by 0, 1, ...; COUNT is an integer expression of literals and the module's consts. Kernels use it to unroll
# loops over register arrays: WGSL has no unroll hint, and an array indexed by a loop variable that the
# driver does not unroll lives in slow local memory instead of registers. Blocks nest.
_REPEAT_LINE = re.compile(r"^[ \t]*//!repeat[ \t]+(\w+)[ \t]+(.+?)[ \t]*$")
_END_LINE = re.compile(r"^[ \t]*//!end[ \t]*$")


def expand_repeats(text: str, origin: str) -> str:
    if "//!repeat" not in text and "//!end" not in text:
        return text
    consts = parse_consts(text)
    return "\n".join(_expand_lines(text.split("\n"), consts, origin))


def _expand_lines(lines: list[str], consts: dict[str, int], origin: str, marks: list[int] | None = None,
                  outer: tuple[str, ...] = ()) -> list[str]:
    """The text of `lines` with their blocks written out, as pieces to join with newlines (an innermost block's
    copies are one piece). Outermost blocks first, so an outer `$i` is a number before an inner block is
    written out. `marks`: the lines holding `//!` (the caller's, when it knows them); `outer`: the variables
    of the blocks around these lines."""
    # Most lines are no directive: find the ones that may be once and copy the lines between them in slices.
    if marks is None:
        marks = [k for k, line in enumerate(lines) if "//!" in line]
    out: list[str] = []
    i = 0  # the lines before i are written
    for pos, k in enumerate(marks):
        if k < i:
            continue  # in a block written already
        m = _REPEAT_LINE.match(lines[k])
        if not m:
            if _END_LINE.match(lines[k]):
                raise RegistryError(f"{origin}: //!end without //!repeat")
            continue
        var, count_expr = m.groups()
        if var in outer:
            # the outer block has already written its number over every `$VAR` of the inner body, so the inner
            # block would repeat the outer's number instead of counting: refuse rather than shadow silently
            raise RegistryError(f"{origin}: //!repeat {var} inside a //!repeat {var} block; give it another name")
        count = eval_int(count_expr, consts)
        if count is None:
            raise RegistryError(f"{origin}: //!repeat count {count_expr!r} is not a constant integer expression")
        if count < 1:   # an expression the reader took (`N - 8u` with N = 4): say its value, not that it has none
            # 0 too: a block unrolls a loop over a register array, and a count of 0 (a tile size divided down to
            # nothing: D / 8u with D = 4) dropped the loop's lines without a word (its array<T, 0> then failed in the
            # shader compiler, or nothing did and the kernel skipped that work)
            raise RegistryError(f"{origin}: //!repeat count {count_expr!r} is {count}; a count is 1 or more")
        depth = 1
        for last, j in enumerate(marks[pos + 1:], start=pos + 1):
            depth += 1 if _REPEAT_LINE.match(lines[j]) else -1 if _END_LINE.match(lines[j]) else 0
            if not depth:
                break
        if depth:
            raise RegistryError(f"{origin}: //!repeat without //!end")
        out.extend(lines[i:k])
        i = j + 1
        if j == k + 1:
            continue  # copies of no lines
        # The body split once at $VAR; copy n joins it with n (a number: no line breaks, no `//!`, made or lost)
        token = re.compile(r"\$\{" + var + r"\}|\$" + var + r"\b")
        pieces = token.split("\n".join(lines[k + 1:j]))
        if last == pos + 1:  # no directive inside
            out.append("\n".join([str(n).join(pieces) for n in range(count)]))
            continue
        inner = [mark - k - 1 for mark in marks[pos + 1:last]]
        for n in range(count):
            out.extend(_expand_lines(str(n).join(pieces).split("\n"), consts, origin, inner, (*outer, var)))
    out.extend(lines[i:])
    return out


@attrs.frozen
class BindingDecl:
    """One `@group(0) @binding(n) var<...> name: type;` of a shader."""

    binding: int
    name: str
    space: str  # "uniform" or "storage"
    access: str  # "read", "read_write" (uniforms: "read")
    type: str

    @property
    def writes(self) -> bool:
        return self.access == "read_write"


_COMMENT_OR_BLOCK = re.compile(r"//[^\n]*|/\*")
_BLOCK_MARK = re.compile(r"/\*|\*/")


@functools.lru_cache(maxsize=4)  # the loader reads six kinds of declaration from each kernel's text in turn
def strip_comments(text: str) -> str:
    """`text` without its `// ...` and `/* ... */` comments (WGSL's block comments nest). Block comments were
    kept: a member, const or binding inside one was read as declared (struct P { a: u32, /* old: u32, */ b: f32 }
    packed b at 8, where the GPU reads 4)."""
    if "/*" not in text:
        return _COMMENT.sub("", text)
    out, i = [], 0
    while (m := _COMMENT_OR_BLOCK.search(text, i)) is not None:
        out.append(text[i:m.start()])
        i = m.end()
        if m.group() != "/*":
            continue   # a line comment (a `/*` inside one opens nothing)
        depth = 1
        while depth:
            mark = _BLOCK_MARK.search(text, i)
            if mark is None:
                raise RegistryError(f"a /* block comment is never closed: {text[m.start():m.start() + 60]!r}")
            depth += 1 if mark.group() == "/*" else -1
            i = mark.end()
        out.append(" ")   # a comment separates tokens as a blank does
    out.append(text[i:])
    return "".join(out)


def parse_bindings(text: str, origin: str) -> tuple[BindingDecl, ...]:
    decls = []
    code = strip_comments(text)
    found = _BINDING.findall(code)
    if len(found) != len(_BINDING_ATTRIBUTE.findall(code)):
        # a declaration the pattern missed was no binding to the loader: missing from the bind group layout (wgpu's
        # validation error at the first dispatch), or an op's bindings "did not match" a shader that declares them
        read = {m.group(0) for m in _BINDING.finditer(code)}
        other = [line.strip() for line in code.split("\n") if _BINDING_ATTRIBUTE.search(line)
                 and not any(line.strip() in r or r in line for r in read)]
        raise RegistryError(f"{origin}: binding declaration not understood: {other[:1] or '?'}; write "
                            f"`@group(0) @binding(N) var<storage, read> name: type;` (or var<uniform>)")
    for group_first, binding_second, binding_first, group_second, space, access, name, type_ in found:
        group, binding = group_first or group_second, binding_second or binding_first
        if int(group) != 0:
            raise RegistryError(f"{origin}: binding {name} is in group {group}; wgraph kernels use group 0 only")
        if space not in ("uniform", "storage"):
            raise RegistryError(f"{origin}: binding {name} has address space {space}; use uniform or storage")
        decls.append(BindingDecl(int(binding), name, space, access or "read", type_.strip()))
    decls.sort(key=lambda d: d.binding)
    numbers = [d.binding for d in decls]
    if len(set(numbers)) != len(numbers):
        raise RegistryError(f"{origin}: duplicate binding numbers {numbers}")
    return tuple(decls)


def parse_entry_points(text: str) -> dict[str, str]:
    """Entry point name -> its @workgroup_size argument text."""
    return {name: (first or second)[1:-1].strip() for first, second, name in _ENTRY.findall(strip_comments(text))}


def split_arguments(text: str) -> list[str]:
    """`text` split at its commas outside parentheses and template brackets: "max(A, 2u), 1" is two arguments."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "(<":
            depth += 1
        elif ch in ")>":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def parse_overrides(text: str) -> dict[str, str]:
    """Pipeline-overridable constants without a default (`override NAME: type;`) -> their types: every
    pipeline of the kernel must give them a value (Kernel.specialized)."""
    return dict(_OVERRIDE.findall(strip_comments(text)))


def parse_consts(text: str) -> dict[str, int]:
    """Module-scope `const` values that are integer expressions of literals and earlier consts. A name declared
    twice with different values (a function's const shadowing a module one: WGSL allows it) is left out: this
    reader does not know scopes, and the last declaration is not the one a planner means."""
    values: dict[str, int] = {}
    seen: dict[str, int | None] = {}  # every declaration's value, None where it is no integer expression
    twice: set[str] = set()
    for name, expr in _CONST.findall(strip_comments(text)):
        value = eval_int(expr, values)
        if name in twice or (name in seen and seen[name] != value):
            twice.add(name)
            values.pop(name, None)
            continue
        seen[name] = value
        if value is not None:
            values[name] = value
    return values


_INT_LITERAL = re.compile(r"\b(\d+)[ui]?\b")
_NAME = re.compile(r"\b[A-Za-z_]\w*\b")
_INT_EXPR = re.compile(r"(?:[\d\s+\-*/(),]|max|min)+")


_INT_FUNCS = {"max": max, "min": min}


def eval_int(expr: str, consts: dict[str, int]) -> int | None:
    """Evaluate an integer expression of literals, consts, + - * / ( ) and WGSL's max(a, b) / min(a, b);
    None if it is anything else."""
    return _eval_int(expr, tuple(consts.get(name, "?") for name in _names(expr)))


# Memoized: loading the registry evaluates ~50,000 expressions (consts, repeat counts), a few hundred distinct.
@functools.lru_cache(maxsize=4096)
def _names(expr: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(n for n in _NAME.findall(expr) if n not in _INT_FUNCS))


@functools.lru_cache(maxsize=4096)
def _eval_int(expr: str, values: tuple) -> int | None:
    """`expr` with its names (`_names`) taking `values` ("?" for an unknown name)."""
    known = dict(zip(_names(expr), values))
    expr = _NAME.sub(lambda m: str(known.get(m.group(0), m.group(0))), expr)
    expr = _INT_LITERAL.sub(r"\1", expr)
    if not _INT_EXPR.fullmatch(expr):
        return None
    try:  # only digits, operators, commas and the two functions remain
        return _int_value(ast.parse(expr.strip(), mode="eval").body)
    except (SyntaxError, _NotInt):   # max(a), a stray comma, a division by 0
        return None


class _NotInt(Exception):
    pass


def _div(a: int, b: int) -> int:
    """WGSL's integer division: truncated toward zero (-7 / 2 is -3, where Python's -7 // 2 is -4); by 0 no value
    (a shader-creation error in a const-expression; Python's ZeroDivisionError escaped the loader)."""
    if b == 0:
        raise _NotInt
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: _div}


def _int_value(node: ast.AST) -> int:
    """The value of a parsed expression of int literals, + - * /, unary minus and max(a, b) / min(a, b)."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        return _BINARY[type(node.op)](_int_value(node.left), _int_value(node.right))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = _int_value(node.operand)
        return -value if isinstance(node.op, ast.USub) else value
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _INT_FUNCS
            and len(node.args) == 2 and not node.keywords):   # WGSL's max and min take two arguments
        return _INT_FUNCS[node.func.id](_int_value(node.args[0]), _int_value(node.args[1]))
    raise _NotInt   # `**` (no WGSL operator), `//`, a call of anything else


# ---- layout by WGSL's rules (https://www.w3.org/TR/WGSL/#alignment-and-size) ----

_SCALARS = {"f32": (4, 4), "u32": (4, 4), "i32": (4, 4), "f16": (2, 2)}
_SHORT = {"f": "f32", "i": "i32", "u": "u32", "h": "f16"}   # vec3f, mat4x4h


@attrs.frozen
class FieldLayout:
    name: str
    type: str
    offset: int
    size: int


@attrs.frozen
class StructLayout:
    """Field offsets of a WGSL struct; `size` is rounded to 16 bytes so it can back a uniform binding (WGSL's own
    SizeOf rounds to the struct's alignment: type_align_size)."""

    name: str
    fields: tuple[FieldLayout, ...]
    size: int

    def field(self, name: str) -> FieldLayout:
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(name)


def parse_structs(text: str) -> dict[str, list[tuple[str, str, tuple[tuple[str, str], ...]]]]:
    """Each struct's members: (name, type, attributes as (name, argument text) pairs: @align(16) is ("align",
    "16")). The attributes were matched and dropped: a member's @align / @size moved the GPU's offsets away from
    the packer's."""
    structs = {}
    for name, body in _STRUCT.findall(strip_comments(text)):
        structs[name] = [(f, "".join(t.split()),
                          tuple((a, arg[1:-1].strip()) for a, arg in _ATTRIBUTE.findall(attributes)))
                         for attributes, f, t in _FIELD.findall(body.strip())]
    return structs


def _array_parts(type_: str) -> tuple[str, str] | None:
    """(element type, length expression) of `array<E, N>`, split at its top-level comma (N may be max(a, b),
    E may be a vec4<f32>); None for anything else."""
    if not (type_.startswith("array<") and type_.endswith(">")):
        return None
    depth = 0
    for i, ch in enumerate(type_[6:-1], start=6):
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
        elif ch == "," and depth == 0:
            return type_[6:i].strip(), type_[i + 1:-1].strip()
    return None


def type_align_size(type_: str, structs: dict, consts: dict[str, int]) -> tuple[int, int]:
    type_ = type_.replace(" ", "")
    if type_ in _SCALARS:
        return _SCALARS[type_]
    m = re.fullmatch(r"vec([234])<(\w+)>", type_) or re.fullmatch(r"vec([234])([fiuh])", type_)
    if m:
        n = int(m.group(1))
        scalar = {"f": "f32", "i": "i32", "u": "u32", "h": "f16"}.get(m.group(2), m.group(2))
        s = _SCALARS[scalar][1]
        return (s * (4 if n == 3 else n), s * n)
    m = re.fullmatch(r"mat([234])x([234])<(\w+)>", type_) or re.fullmatch(r"mat([234])x([234])([fh])", type_)
    if m:   # C columns of vecR: AlignOf(vecR<T>), SizeOf(array<vecR<T>, C>) (a workgroup tile; was "no known layout")
        column_align, column_size = type_align_size(f"vec{m.group(2)}<{_SHORT.get(m.group(3), m.group(3))}>", structs,
                                                    consts)
        return (column_align, int(m.group(1)) * _round_up(column_size, column_align))
    if type_ == "bool":   # in workgroup memory (no host-shareable layout; implementations give it 4 bytes)
        return (4, 4)
    m = re.fullmatch(r"atomic<(\w+)>", type_)
    if m:
        return _SCALARS[m.group(1)]
    parts = _array_parts(type_)
    if parts:
        element, length = parts
        align, size = type_align_size(element, structs, consts)
        count = eval_int(length, consts)
        if count is None:
            raise RegistryError(f"array length {length!r} is not a constant integer expression")
        stride = -(-size // align) * align
        return (align, stride * count)
    if type_ in structs:
        _fields, align, end = _members(type_, structs, consts)
        # WGSL's SizeOf(S): the end of its last member rounded up to AlignOf(S), not to 16 (the uniform block's
        # rounding, StructLayout.size): an array<S, N> of an 8-byte S in workgroup memory counted 16 bytes each
        return (align, _round_up(end, align))
    raise RegistryError(f"type {type_!r} has no known WGSL layout")


def _round_up(n: int, align: int) -> int:
    return -(-n // align) * align


def _member_attribute(struct: str, field: str, type_: str, attribute: str, arg: str, natural: int,
                      consts: dict[str, int]) -> int:
    """The value of a member's @align(n) (a power of 2, a multiple of the type's alignment) or @size(n) (at least the
    type's size), by WGSL's rules."""
    value = eval_int(arg, consts)
    where = f"struct {struct}, member {field}: {type_}: @{attribute}({arg})"
    if value is None:
        raise RegistryError(f"{where} is not a constant integer expression")
    if attribute == "align" and (value < 1 or value & (value - 1) or value % natural):
        raise RegistryError(f"{where} must be a power of 2 and a multiple of the type's alignment, {natural}")
    if attribute == "size" and value < natural:
        raise RegistryError(f"{where} is below the type's size, {natural}")
    return value


def _members(name: str, structs: dict, consts: dict[str, int]) -> tuple[list[FieldLayout], int, int]:
    """A struct's members by WGSL's layout rules (https://www.w3.org/TR/WGSL/#structure-member-layout), @align(n)
    and @size(n) included: their layouts, AlignOf(S) and the end of the last member."""
    offset, fields, max_align = 0, [], 1
    for field_name, type_, attributes in structs[name]:
        align, size = type_align_size(type_, structs, consts)
        for attribute, arg in attributes:
            if attribute == "align":
                align = _member_attribute(name, field_name, type_, attribute, arg, align, consts)
            elif attribute == "size":
                size = _member_attribute(name, field_name, type_, attribute, arg, size, consts)
        offset = _round_up(offset, align)
        fields.append(FieldLayout(field_name, type_, offset, size))
        offset += size
        max_align = max(max_align, align)
    return fields, max_align, offset


def struct_layout(name: str, structs: dict, consts: dict[str, int]) -> StructLayout:
    fields, align, end = _members(name, structs, consts)
    block = max(align, 16)   # a uniform block: whole 16-byte rows
    return StructLayout(name, tuple(fields), _round_up(end, block))


_ALIAS = re.compile(r"alias(?<!\walias)\s+(\w+)\s*=\s*([^;]+);")  # `\balias`, see _CONST


def workgroup_bytes(text: str, structs: dict, consts: dict[str, int]) -> int:
    """Bytes of workgroup memory the module declares (every `var<workgroup>`); `alias` names resolved."""
    code = strip_comments(text)
    aliases = {name: type_.strip() for name, type_ in _ALIAS.findall(code)}
    total = 0
    for _name, type_ in _WORKGROUP_VAR.findall(code):
        for name, target in aliases.items():
            type_ = re.sub(rf"\b{name}\b", target, type_)
        total += type_align_size(type_.strip(), structs, consts)[1]
    return total
