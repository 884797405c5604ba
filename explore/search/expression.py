"""Safe arithmetic expressions over scenario fields, for design-space files.

``Expression.parse("system.devices / (parallelism.tp * parallelism.pp)")`` checks
the syntax tree once (numbers, dotted names, + - * / // % **, a few numpy
functions; nothing else), then evaluates on numpy arrays from a name -> array
mapping. No ``eval`` of arbitrary code.

Every evaluation is bounded: expressions are at most ``MAX_CHARS`` characters and
``MAX_DEPTH`` levels deep (checked at load), function arities are checked at load,
and evaluation is in float64 (``1/0`` is inf, ``9**9**9`` is inf, in constant
time), so no input raises, recurses without bound or allocates a huge integer. A
constant expression that is not finite (``"1/0"``) is refused at load; a
non-finite value from fields makes that design invalid (``explore.search.space``).
"""
from __future__ import annotations

import ast
import functools
import math
import operator
from dataclasses import dataclass
from typing import Any

import numpy as np

from explore.scenario import ScenarioError


class ExpressionError(ScenarioError):
    """A malformed expression (raised as the caller's SpaceError)."""


_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
           ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
           ast.Pow: operator.pow}
_UNOPS = {ast.USub: operator.neg, ast.UAdd: operator.pos}
_FUNCS = {"floor": np.floor, "ceil": np.ceil, "round": np.round, "sqrt": np.sqrt,
          "log2": np.log2, "log": np.log, "exp": np.exp, "abs": np.abs,
          "min": lambda *a: functools.reduce(np.minimum, a),
          "max": lambda *a: functools.reduce(np.maximum, a)}
# (least, most) arguments of each function
_ARITY = {**{f: (1, 1) for f in ("floor", "ceil", "round", "sqrt", "log2", "log", "exp", "abs")},
          "min": (2, 64), "max": (2, 64)}
MAX_CHARS = 2000     # longest expression text
MAX_DEPTH = 200      # deepest syntax tree (nested operators, parentheses, calls)


def _dotted(node) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = _dotted(node.value)
        return None if head is None else f"{head}.{node.attr}"
    return None


@dataclass(frozen=True)
class Expression:
    """Arithmetic over scenario fields and variable names; parsed once, evaluated on arrays.

    Allowed: numbers, + - * / // % **, unary -, and floor ceil round sqrt log2 log exp abs
    min max. Anything else (attribute calls, subscripts, lambdas, ...) is rejected at load."""
    text: str
    names: tuple

    @classmethod
    def parse(cls, text, where: str) -> "Expression":
        if isinstance(text, (int, float)) and not isinstance(text, bool):
            text = repr(text)
        if not isinstance(text, str):
            raise ExpressionError(f"{where}: value {_short(repr(text))} is not an expression; allowed: a string "
                             f"such as \"system.devices / (parallelism.tp * parallelism.pp)\"")
        if len(text) > MAX_CHARS:
            raise ExpressionError(f"{where}: value {_short(text)} is {len(text)} characters long; "
                                  f"allowed: an expression of at most {MAX_CHARS} characters")
        try:
            tree = ast.parse(text, mode="eval")
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            raise ExpressionError(f"{where}: value {_short(text)} is not a valid expression; allowed: "
                                  f"arithmetic such as \"system.devices / parallelism.tp\"") from None
        names: list[str] = []
        cls._check(tree.body, where, text, names)
        expr = cls(text, tuple(dict.fromkeys(names)))
        if not expr.names:   # a constant: its value is known now
            val = np.asarray(expr({}), dtype=float)
            if not np.isfinite(val).all():
                raise ExpressionError(f"{where}: value {_short(text)} evaluates to {float(val):g}; "
                                      f"allowed: an expression with a finite value")
        return expr

    @classmethod
    def _check(cls, node, where, text, names, depth: int = 0) -> None:
        if depth > MAX_DEPTH:
            raise ExpressionError(f"{where}: value {_short(text)} nests deeper than {MAX_DEPTH} levels; "
                                  f"allowed: at most {MAX_DEPTH} nested operations")
        depth += 1
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) \
                and not isinstance(node.value, bool):
            try:
                ok = math.isfinite(float(node.value))
            except OverflowError:
                ok = False
            if not ok:
                raise ExpressionError(f"{where}: number {str(node.value)[:20]} in {_short(text)} is not "
                                      f"a finite float; allowed: numbers of magnitude below 1e308")
            return
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            cls._check(node.left, where, text, names, depth)
            cls._check(node.right, where, text, names, depth)
            return
        if isinstance(node, ast.UnaryOp) and type(node.op) in _UNOPS:
            cls._check(node.operand, where, text, names, depth)
            return
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id in _FUNCS and not node.keywords:
            lo, hi = _ARITY[node.func.id]
            if not lo <= len(node.args) <= hi or any(isinstance(a, ast.Starred) for a in node.args):
                want = f"{lo} argument" if lo == hi else f"{lo} to {hi} arguments"
                raise ExpressionError(f"{where}: {ast.unparse(node)!r} in {_short(text)} gives {node.func.id} "
                                      f"{len(node.args)} arguments; allowed: {want}")
            for a in node.args:
                cls._check(a, where, text, names, depth)
            return
        d = _dotted(node)
        if d is not None and "__" not in d:
            names.append(d)
            return
        raise ExpressionError(f"{where}: {_short(ast.unparse(node))} in {_short(text)} is not allowed; allowed: "
                         f"numbers, field names, + - * / // % **, {', '.join(_FUNCS)}")

    def __call__(self, env: dict[str, Any]):
        """The value on float64 arrays (inf/NaN where undefined; never raises for a parsed expression)."""
        with np.errstate(all="ignore"):
            return self._eval(_tree(self.text), env)

    def _eval(self, node, env):
        if isinstance(node, ast.Constant):
            return np.float64(node.value)
        if isinstance(node, ast.BinOp):
            return _BINOPS[type(node.op)](self._eval(node.left, env), self._eval(node.right, env))
        if isinstance(node, ast.UnaryOp):
            return _UNOPS[type(node.op)](self._eval(node.operand, env))
        if isinstance(node, ast.Call):
            return _FUNCS[node.func.id](*[self._eval(a, env) for a in node.args])
        return np.asarray(env[_dotted(node)], dtype=float)


def _short(text: str, n: int = 60) -> str:
    return repr(text) if len(text) <= n else repr(text[:n]) + "..."


@functools.lru_cache(maxsize=1024)
def _tree(text: str):
    return ast.parse(text, mode="eval").body
