"""A tiny, safe expression language for derived variables and conditions in benchmark specs.

Only literals, names, arithmetic, comparisons, boolean operators, indexing, attribute access on
records and a few whitelisted functions are allowed: a spec is data, never code.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..errors import SpecError


def join_words(items: Sequence[Any], conjunction: str = "and") -> str:
    """``["a", "b", "c"]`` → ``"a, b and c"``."""
    items = [str(i) for i in items]
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + f" {conjunction} " + items[-1]


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "join": join_words,
    "len": len,
    "round": round,
    "min": min,
    "max": max,
    "int": int,
    "str": str,
    "abs": abs,
    "fixed": lambda x, digits: f"{x:.{int(digits)}f}",
    "upper": lambda s: str(s).upper(),
    "lower": lambda s: str(s).lower(),
    "title": lambda s: str(s).title(),
}

_BINARY = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
}
_COMPARE = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
    ast.Gt: operator.gt, ast.GtE: operator.ge, ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b,
}


class Record(dict):
    """A pool entry with fields: ``{drug.name}`` in templates, ``drug.name`` in expressions."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(f"record has no field {name!r}; fields: {sorted(self)}") from None


def evaluate(expression: str, names: Mapping[str, Any]) -> Any:
    """Evaluate ``expression`` over ``names``; raises ``SpecError`` on anything outside the language.

    >>> evaluate("dose * times", {"dose": 5, "times": 3})
    15
    """
    try:
        tree = ast.parse(expression, mode="eval")
    except SyntaxError as exc:
        raise SpecError(f"cannot parse expression {expression!r}: {exc.msg}") from None
    try:
        return _eval(tree.body, names)
    except SpecError:
        raise
    except Exception as exc:  # arithmetic errors in user expressions become spec errors
        raise SpecError(f"expression {expression!r} failed: {exc}") from None


def _eval(node: ast.AST, names: Mapping[str, Any]) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id in names:
            return names[node.id]
        raise SpecError(f"unknown name {node.id!r}; defined so far: {sorted(names)}")
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        return _BINARY[type(node.op)](_eval(node.left, names), _eval(node.right, names))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.Not)):
        value = _eval(node.operand, names)
        return -value if isinstance(node.op, ast.USub) else not value
    if isinstance(node, ast.BoolOp):
        values = (_eval(v, names) for v in node.values)
        return all(values) if isinstance(node.op, ast.And) else any(values)
    if isinstance(node, ast.Compare):
        left = _eval(node.left, names)
        for op, right_node in zip(node.ops, node.comparators):
            right = _eval(right_node, names)
            if type(op) not in _COMPARE or not _COMPARE[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.IfExp):
        return _eval(node.body if _eval(node.test, names) else node.orelse, names)
    if isinstance(node, ast.Subscript):
        return _eval(node.value, names)[_eval(node.slice, names)]
    if isinstance(node, ast.Attribute) and isinstance(_eval(node.value, names), Record):
        return getattr(_eval(node.value, names), node.attr)
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_eval(e, names) for e in node.elts]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in FUNCTIONS:
        return FUNCTIONS[node.func.id](*(_eval(a, names) for a in node.args))
    raise SpecError(f"{ast.unparse(node)!r} is not allowed in a spec expression")
