"""`满足表达式` / `expr` expressions: an AST allow-list, then evaluation among the allowed names.

Rule libraries come from many teams, and a farm that refuses custom code still runs their
expressions, so an expression must not reach anything the rule language does not offer
(spec/rules.md "Conditions"). Checking happens when the rules are loaded, so a refused expression
is a rule error naming the construct:

- only expression syntax: no assignment (`:=`), no `await`/`yield`;
- names: `d`, `res_store`, `res_filter`, `re` and the listed builtins, plus the names the
  expression binds itself (comprehension targets, lambda parameters); no dunder name;
- attributes: never one starting with `_`, nor `format`/`format_map` (their field syntax reads
  attributes: `"{0.__class__}".format(d)`), nor the frame and code attributes of generators;
  `re.X` only for the functions and flags listed in REGEX_NAMES; `res_store.X` / `res_filter.X`
  only for the predefined sets.

Evaluation then closes what names alone cannot: every attribute read goes through
`guarded_attribute`, which admits the attributes of plain data (strings, numbers, containers, the
index's records), of compiled patterns and matches, and the read-only navigation of an extracted
element — so `d.getroottree().write(...)` or a generator's frame are refused at run time, and the
value fails with the reason. Operators, f-string fields, unpacking, `str`, `sum` and the methods
whose results can outgrow their operands go through stages/rules/bounded.py, which refuses a
result too large before it is computed: those run inside one C call, where `rules.timeout`
cannot stop them.
"""

from __future__ import annotations

import ast
import re
from types import SimpleNamespace
from typing import Any, NamedTuple

from lxml import etree

from .bounded import (
    BOUNDED_METHODS,
    BOUNDED_OPERATORS,
    DICT,
    REGEX_FUNCTIONS,
    SET,
    STR,
    BoundedType,
    ExpressionRefused,
    bounded_binop,
    bounded_chain,
    bounded_compare,
    bounded_format,
    bounded_item,
    bounded_max,
    bounded_method,
    bounded_min,
    bounded_sorted,
    bounded_sum,
    check_hash,
    sized,
)
from .functions import RuleModules
from .lines import line_of
from .traced import TracedEntries

BUILTIN_NAMES: dict[str, Any] = {
    "len": len,
    "int": int,
    "float": float,
    "str": str,
    "bool": bool,
    "list": list,
    "tuple": tuple,
    "dict": dict,
    "set": set,
    "any": any,
    "all": all,
    "min": min,
    "max": max,
    "abs": abs,
    "sum": sum,
    "sorted": sorted,
}
INDEX_MODULES = ("res_store", "res_filter")
INDEX_ATTRIBUTES = {
    "res_store": frozenset({"res_in_repo", "res_in_disk", "res_virt_info", "ilevels"}),
    "res_filter": frozenset(
        {
            "ALL_RES",
            "ALL_RES_GUID",
            "ALL_USED_FILTER",
            "ALL_USED_ILEVEL",
            # the four functions, as custom code calls them (rules.md)
            "guidToRealPath",
            "guidToResourcePath",
            "getResourcesInILevel",
            "validGUID",
        }
    ),
}
#: What `re` offers an expression: its functions and flags; not its modules, caches or classes.
REGEX_NAMES = (
    "compile",
    "search",
    "match",
    "fullmatch",
    "findall",
    "finditer",
    "sub",
    "subn",
    "split",
    "escape",
    "IGNORECASE",
    "I",
    "MULTILINE",
    "M",
    "DOTALL",
    "S",
    "VERBOSE",
    "X",
    "ASCII",
    "A",
    "UNICODE",
    "U",
    "LOCALE",
    "L",
    "NOFLAG",
    # not DEBUG (it prints the pattern's parse to the build's standard output) nor the
    # deprecated TEMPLATE / T (gone in Python 3.13)
)
ALLOWED_NAMES = frozenset({"d", "re", *INDEX_MODULES, *BUILTIN_NAMES})

# Attribute names refused wherever they appear (see the module docstring), and the prefixes of
# the frame and code attributes of generators, coroutines, async generators, frames and
# tracebacks (spec/rules.md: gi_*, cr_*, ag_*, f_*, tb_*).
DENIED_ATTRIBUTES = frozenset({"format", "format_map", "mro", "co_code"})
DENIED_PREFIXES = ("_", "gi_", "cr_", "ag_", "f_", "tb_")


def denied_attribute(name: str) -> bool:
    return name.startswith(DENIED_PREFIXES) or name in DENIED_ATTRIBUTES


_OPERATORS = (
    ast.Add,
    ast.Sub,
    ast.Mult,
    ast.MatMult,
    ast.Div,
    ast.Mod,
    ast.Pow,
    ast.LShift,
    ast.RShift,
    ast.BitOr,
    ast.BitXor,
    ast.BitAnd,
    ast.FloorDiv,
    ast.Invert,
    ast.Not,
    ast.UAdd,
    ast.USub,
    ast.And,
    ast.Or,
    ast.Eq,
    ast.NotEq,
    ast.Lt,
    ast.LtE,
    ast.Gt,
    ast.GtE,
    ast.Is,
    ast.IsNot,
    ast.In,
    ast.NotIn,
)
_NODES = (
    ast.Expression,
    ast.BoolOp,
    ast.BinOp,
    ast.UnaryOp,
    ast.Lambda,
    ast.IfExp,
    ast.Dict,
    ast.Set,
    ast.ListComp,
    ast.SetComp,
    ast.DictComp,
    ast.GeneratorExp,
    ast.comprehension,
    ast.Compare,
    ast.Call,
    ast.keyword,
    ast.FormattedValue,
    ast.JoinedStr,
    ast.Constant,
    ast.Attribute,
    ast.Subscript,
    ast.Starred,
    ast.Name,
    ast.List,
    ast.Tuple,
    ast.Slice,
    ast.arguments,
    ast.arg,
    ast.Load,
    ast.Store,
    *_OPERATORS,
)
# What expressions call instead of the builtins that can make or visit too much (bounded.py).
BOUNDED_BUILTINS: dict[str, Any] = {
    "str": STR,
    "set": SET,
    "dict": DICT,
    "sum": bounded_sum,
    "sorted": bounded_sorted,
    "min": bounded_min,
    "max": bounded_max,
}

_GUARD = "__orchestrate_attribute__"
_BINOP = "__orchestrate_binop__"
_FORMAT = "__orchestrate_format__"
_SIZED = "__orchestrate_sized__"
_COMPARE = "__orchestrate_compare__"
_CHAIN = "__orchestrate_chain__"
_ITEM = "__orchestrate_item__"
_HASH = "__orchestrate_hash__"


class ExpressionError(ValueError):
    """An expression that does not compile or uses what expressions may not (a rule error)."""


class CompiledExpression(NamedTuple):
    code: Any
    names: frozenset[str]  # the global names it reads

    @property
    def uses_index(self) -> bool:
        return bool(self.names & set(INDEX_MODULES))


def _describe(node: ast.AST) -> str:
    try:
        return repr(ast.unparse(node))
    except Exception:  # an unparseable fragment: its kind says enough
        return type(node).__name__


def check_expression(tree: ast.Expression) -> frozenset[str]:
    """Refuse what expressions may not use; the global names the expression reads."""
    bound: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            bound.add(node.id)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
    read: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, _NODES):
            raise ExpressionError(f"{type(node).__name__} is not allowed in expressions")
        if isinstance(node, (ast.Name, ast.arg)):
            name = node.id if isinstance(node, ast.Name) else node.arg
            if name.startswith("__"):
                raise ExpressionError(f"the name {name!r} is not allowed in expressions")
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                if name in bound:
                    continue
                if name not in ALLOWED_NAMES:
                    raise ExpressionError(
                        f"the name {name!r} is not available in expressions (available: "
                        f"{', '.join(sorted(ALLOWED_NAMES))})"
                    )
                read.add(name)
        elif isinstance(node, ast.Attribute):
            _check_attribute(node, bound)
        elif isinstance(node, ast.Constant) and not isinstance(
            node.value, (str, bytes, int, float, complex, bool, type(None), type(...))
        ):
            raise ExpressionError(f"the constant {_describe(node)} is not allowed")
    return frozenset(read)


def _check_attribute(node: ast.Attribute, bound: set[str]) -> None:
    name = node.attr
    if denied_attribute(name):
        raise ExpressionError(f"the attribute {name!r} is not allowed in expressions")
    owner = node.value
    if isinstance(owner, ast.Name) and owner.id not in bound:
        if owner.id == "re" and name not in REGEX_NAMES:
            raise ExpressionError(
                f"re.{name} is not available (re offers {', '.join(REGEX_NAMES)})"
            )
        allowed = INDEX_ATTRIBUTES.get(owner.id)
        if allowed is not None and name not in allowed:
            raise ExpressionError(
                f"{owner.id}.{name} is not a predefined set (known: {', '.join(sorted(allowed))})"
            )


def _call(name: str, *args: ast.expr) -> ast.Call:
    return ast.Call(ast.Name(name, ast.Load()), list(args), keywords=[])


def _literal(node: ast.expr) -> bool:
    """A constant, or a display of constants: comparing with it, or hashing it, is bounded."""
    if isinstance(node, ast.Constant):
        return True
    return isinstance(node, (ast.List, ast.Tuple, ast.Set)) and all(map(_literal, node.elts))


def _needs_no_guard(operator: str, left: ast.expr, right: ast.expr) -> bool:
    """Comparing with a literal visits at most the literal, and so does looking for a literal
    or looking in a literal list; a literal set hashes the value (guarded); `is` visits
    nothing."""
    if operator in ("Is", "IsNot"):
        return True
    if operator in ("In", "NotIn"):
        return _literal(left) or (_literal(right) and not isinstance(right, ast.Set))
    return _literal(left) or _literal(right)


def _hashed(node: ast.expr) -> ast.expr:
    return node if _literal(node) else _call(_HASH, node)


def _thunk(node: ast.expr) -> ast.Lambda:
    arguments = ast.arguments(
        posonlyargs=[], args=[], vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[]
    )
    return ast.Lambda(arguments, node)


class _Guard(ast.NodeTransformer):
    """Route attribute reads, what can make results too large in one C call (operators,
    f-string fields, unpacking) and what can visit too much (comparisons, hashing) through the
    run-time guards."""

    def visit_Compare(self, node: ast.Compare) -> ast.AST:
        self.generic_visit(node)
        operators = [type(op).__name__ for op in node.ops]
        if len(operators) == 1:
            if _needs_no_guard(operators[0], node.left, node.comparators[0]):
                return node
            call = _call(_COMPARE, ast.Constant(operators[0]), node.left, node.comparators[0])
        else:  # each operand evaluated when Python would: thunks
            operands = [_thunk(operand) for operand in (node.left, *node.comparators)]
            names = ast.Tuple([ast.Constant(name) for name in operators], ast.Load())
            call = _call(_CHAIN, names, *operands)
        return ast.copy_location(call, node)

    def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
        self.generic_visit(node)
        if not isinstance(node.ctx, ast.Load) or isinstance(node.slice, ast.Slice):
            return node
        if _literal(node.slice):
            return node
        return ast.copy_location(_call(_ITEM, node.value, node.slice), node)

    def visit_Set(self, node: ast.Set) -> ast.AST:
        self.generic_visit(node)
        node.elts = [elt if isinstance(elt, ast.Starred) else _hashed(elt) for elt in node.elts]
        return node

    def visit_SetComp(self, node: ast.SetComp) -> ast.AST:
        self.generic_visit(node)
        node.elt = _hashed(node.elt)
        return node

    def visit_DictComp(self, node: ast.DictComp) -> ast.AST:
        self.generic_visit(node)
        node.key = _hashed(node.key)
        return node

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        self.generic_visit(node)
        return ast.copy_location(_call(_GUARD, node.value, ast.Constant(node.attr)), node)

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        operator = type(node.op).__name__
        if operator not in BOUNDED_OPERATORS:
            return node
        return ast.copy_location(_call(_BINOP, ast.Constant(operator), node.left, node.right), node)

    def visit_FormattedValue(self, node: ast.FormattedValue) -> ast.AST:
        self.generic_visit(node)
        spec = node.format_spec if node.format_spec is not None else ast.Constant("")
        field = _call(_FORMAT, node.value, ast.Constant(node.conversion), spec)
        return ast.copy_location(ast.FormattedValue(field, -1, None), node)

    def visit_Starred(self, node: ast.Starred) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.ctx, ast.Store):  # a target: `for a, *rest in d`
            return node
        return ast.copy_location(ast.Starred(_call(_SIZED, node.value), node.ctx), node)

    def visit_Dict(self, node: ast.Dict) -> ast.AST:
        self.generic_visit(node)
        node.values = [
            _call(_SIZED, value) if key is None else value
            for key, value in zip(node.keys, node.values)
        ]
        node.keys = [None if key is None else _hashed(key) for key in node.keys]
        return node

    def visit_keyword(self, node: ast.keyword) -> ast.AST:
        self.generic_visit(node)
        if node.arg is None:  # f(**value)
            node.value = _call(_SIZED, node.value)
        return node


_COMPILED: dict[str, CompiledExpression] = {}


def compile_expression(source: str) -> CompiledExpression:
    """Check and compile an expression (cached per process: code objects do not pickle).

    Raises ExpressionError naming what is wrong."""
    compiled = _COMPILED.get(source)
    if compiled is not None:
        return compiled
    try:
        tree = ast.parse(source.strip(), "<满足表达式>", mode="eval")
    except SyntaxError as exc:
        raise ExpressionError(f"does not compile: {exc.msg}") from None
    except (ValueError, MemoryError, RecursionError) as exc:  # NUL bytes, absurd nesting
        raise ExpressionError(f"does not compile: {exc}") from None
    names = check_expression(tree)
    guarded = ast.fix_missing_locations(_Guard().visit(tree))
    try:
        code = compile(guarded, "<满足表达式>", "eval")
    except (SyntaxError, ValueError, RecursionError) as exc:
        raise ExpressionError(f"does not compile: {exc}") from None
    compiled = _COMPILED[source] = CompiledExpression(code, names)
    return compiled


# -- run time ------------------------------------------------------------------------------------


class RegexFunctions:
    """What `re` is inside an expression: the functions and flags of REGEX_NAMES, nothing else."""

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        if name in REGEX_NAMES:
            return REGEX_FUNCTIONS.get(name) or getattr(re, name)
        raise AttributeError(f"re.{name} is not available in expressions")

    def __repr__(self) -> str:
        return "<re: functions and flags only>"


REGEX = RegexFunctions()

_DATA_TYPES = (str, bytes, int, float, complex, list, tuple, dict, set, frozenset, range)
_VIEW_TYPES: tuple[type, ...] = (type({}.keys()), type({}.values()), type({}.items()))
_ELEMENT_READS = frozenset(
    {
        "tag",
        "text",
        "tail",
        "attrib",
        "get",
        "keys",
        "values",
        "items",
        "find",
        "findall",
        "findtext",
        "iterfind",
        "iter",
        "iterchildren",
        "iterdescendants",
        "iterancestors",
        "itersiblings",
        "getparent",
        "getnext",
        "getprevious",
        "getchildren",
        "sourceline",
        "prefix",
        "nsmap",
    }
)
_ATTRIB_READS = frozenset({"get", "keys", "values", "items", "has_key"})
_BUILTIN_TYPES = frozenset(value for value in BUILTIN_NAMES.values() if isinstance(value, type))
_BOUNDED_NAMES = frozenset(name for _, name in BOUNDED_METHODS)


# Exact types whose every public attribute `_readable` allows: checked first, by one set
# lookup (guarded_attribute runs for every attribute an expression reads, value after value).
#: What an expression may read of a predefined set (traced.TracedEntries), as of a dict.
_TRACED_READS = frozenset({"get", "keys", "items", "values"})
_READABLE_TYPES = frozenset((*_DATA_TYPES, *_VIEW_TYPES, re.Pattern, re.Match, SimpleNamespace))


def guarded_attribute(owner: Any, name: str) -> Any:
    """`owner.name`, if it is an attribute of data an expression may read (bounded, when its
    result can outgrow its operands: bounded.py)."""
    if type(owner) is BoundedType:  # `str.join`, `dict.fromkeys`: the type's own
        owner = owner.kind
    if not denied_attribute(name) and (type(owner) in _READABLE_TYPES or _readable(owner, name)):
        if name in _BOUNDED_NAMES:
            bounded = bounded_method(owner, name)
            if bounded is not None:
                return bounded
        if name == "sourceline" and isinstance(owner, etree._Element):
            return line_of(owner)  # past line 65,535 too (lines.py)
        return getattr(owner, name)
    raise ExpressionRefused(
        f"the attribute {name!r} of a {type(owner).__name__} is not available in expressions"
    )


def _readable(owner: Any, name: str) -> bool:
    if owner is REGEX:
        return name in REGEX_NAMES
    if isinstance(owner, TracedEntries):  # a predefined set, as a dict is read
        return name in _TRACED_READS
    if isinstance(owner, (_DATA_TYPES, _VIEW_TYPES, re.Pattern, re.Match, SimpleNamespace)):
        return True
    if isinstance(owner, etree._Element):
        return name in _ELEMENT_READS
    if isinstance(owner, etree._Attrib):
        return name in _ATTRIB_READS
    return any(owner is kind for kind in _BUILTIN_TYPES)  # str.join, dict.fromkeys, …


def expression_globals(modules: RuleModules) -> dict:
    """Globals for an expression: `d` (set per value), the index modules, the allowed names."""
    return {
        "__builtins__": {},
        **BUILTIN_NAMES,
        **BOUNDED_BUILTINS,
        "re": REGEX,
        "res_store": modules.res_store,
        "res_filter": modules.res_filter,
        "d": None,
        _GUARD: guarded_attribute,
        _BINOP: bounded_binop,
        _FORMAT: bounded_format,
        _SIZED: sized,
        _COMPARE: bounded_compare,
        _CHAIN: bounded_chain,
        _ITEM: bounded_item,
        _HASH: check_hash,
    }
