"""Safe arithmetic expressions over scenario fields, for design-space files.

``Expression.parse("system.devices / (parallelism.tp * parallelism.pp)")`` checks
the syntax tree once (numbers, dotted names, + - * / // % **, a few numpy
functions; nothing else), then evaluates on numpy arrays from a name -> array
mapping. No ``eval`` of arbitrary code.
"""
from __future__ import annotations

import ast
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
          "min": np.minimum, "max": np.maximum}


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
            raise ExpressionError(f"{where}: value {text!r} is not an expression; allowed: a string "
                             f"such as \"system.devices / (parallelism.tp * parallelism.pp)\"")
        try:
            tree = ast.parse(text, mode="eval")
        except SyntaxError:
            raise ExpressionError(f"{where}: value {text!r} is not a valid expression") from None
        names: list[str] = []
        cls._check(tree.body, where, text, names)
        return cls(text, tuple(dict.fromkeys(names)))

    @classmethod
    def _check(cls, node, where, text, names) -> None:
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) \
                and not isinstance(node.value, bool):
            return
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            cls._check(node.left, where, text, names)
            cls._check(node.right, where, text, names)
            return
        if isinstance(node, ast.UnaryOp) and type(node.op) in _UNOPS:
            cls._check(node.operand, where, text, names)
            return
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id in _FUNCS and not node.keywords:
            for a in node.args:
                cls._check(a, where, text, names)
            return
        d = _dotted(node)
        if d is not None and "__" not in d:
            names.append(d)
            return
        raise ExpressionError(f"{where}: {ast.unparse(node)!r} in {text!r} is not allowed; allowed: "
                         f"numbers, field names, + - * / // % **, {', '.join(_FUNCS)}")

    def __call__(self, env: dict[str, Any]):
        return self._eval(ast.parse(self.text, mode="eval").body, env)

    def _eval(self, node, env):
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.BinOp):
            return _BINOPS[type(node.op)](self._eval(node.left, env), self._eval(node.right, env))
        if isinstance(node, ast.UnaryOp):
            return _UNOPS[type(node.op)](self._eval(node.operand, env))
        if isinstance(node, ast.Call):
            return _FUNCS[node.func.id](*[self._eval(a, env) for a in node.args])
        return env[_dotted(node)]
