"""Python functions as an MCP server: the SDK's own function-to-tool machinery, plus docstring arguments.

::

    def add(a: int, b: int = 1) -> int:
        \"\"\"Add two numbers.

        Args:
            a: the first number.
            b: the second number.
        \"\"\"
        return a + b

    server = function_server([add], name="python")    # an MCPServer with the tool "add"

The SDK's ``MCPServer.add_tool`` builds the input schema from the type hints (pydantic models,
``Annotated[..., Field(...)]``, defaults), runs sync and async functions, and converts the result
(text, content blocks, or ``structuredContent`` with an ``outputSchema`` for typed returns). What
it leaves out is the ``Args:`` section of a Google-style docstring: here each documented parameter
gets its text as the schema's ``description`` (unless an ``Annotated`` one is given), and the tool's
description is the docstring without that section. A function whose only parameter is a pydantic model
takes the model's fields as its arguments (flattened, as a caller expects of ``create_order(order)``).
An exception in a function becomes a tool error (``isError``) that carries its type and message (the SDK
alone would hide the message, as befits a peer's code; these functions are the host program's own).
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable, Sequence
from typing import Annotated, Any, get_origin

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, Field

from mcpmux.canonical_names import is_valid_server_name
from mcpmux.errors import UsageError

__all__ = ["function_server", "parse_docstring"]

_SECTION = re.compile(r"^\s*(Args|Arguments|Parameters|Params)\s*:\s*$")
_OTHER_SECTION = re.compile(r"^\s*(Returns?|Raises|Yields?|Examples?|Notes?|Attributes)\s*:\s*$")
_ARG = re.compile(r"^\s*\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """The description (the docstring without its ``Args:`` section) and each argument's text."""
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    kept: list[str] = []
    params: dict[str, str] = {}
    current: str | None = None
    indent: int | None = None  # of the argument lines; deeper lines continue the current one
    in_args = False
    for line in lines:
        if _SECTION.match(line):
            in_args, current, indent = True, None, None
            continue
        if in_args and (_OTHER_SECTION.match(line) or (line and not line[0].isspace())):
            in_args = False
        if not in_args:
            kept.append(line)
            continue
        depth = len(line) - len(line.lstrip())
        match = _ARG.match(line)
        if match and (indent is None or depth <= indent):
            current, indent = match.group(1), depth
            params[current] = match.group(2).strip()
        elif current and line.strip():
            params[current] = f"{params[current]} {line.strip()}"
    return "\n".join(kept).strip(), params


def _described(fn: Callable[..., Any], params: dict[str, str]) -> Callable[..., Any]:
    """``fn`` with each documented parameter annotated ``Annotated[T, Field(description=...)]``."""
    signature = inspect.signature(fn, eval_str=True)
    changed = []
    for parameter in signature.parameters.values():
        text = params.get(parameter.name)
        annotation = parameter.annotation
        if text and annotation is not inspect.Parameter.empty and get_origin(annotation) is not Annotated:
            parameter = parameter.replace(annotation=Annotated[annotation, Field(description=text)])
        changed.append(parameter)
    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                return await fn(*args, **kwargs)
            except (ToolError, MCPError):
                raise
            except Exception as exc:
                raise _tool_error(exc) from exc

    else:

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except (ToolError, MCPError):
                raise
            except Exception as exc:
                raise _tool_error(exc) from exc

    wrapper.__signature__ = signature.replace(parameters=changed)  # type: ignore[attr-defined]
    return wrapper


def _flattened(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn(order: Order)``, one pydantic model as its only parameter, as a tool whose arguments are the
    model's fields (``{"sku": ..., "qty": ...}``, not ``{"order": {...}}``): the model is built from them
    for each call, so its validation and defaults apply. Any other function is returned as it is (with
    several parameters, a model among them stays nested under its parameter's name)."""
    signature = inspect.signature(fn, eval_str=True)
    parameters = list(signature.parameters.values())
    if len(parameters) != 1:
        return fn
    only = parameters[0]
    model = only.annotation
    if not (isinstance(model, type) and issubclass(model, BaseModel)) or only.kind is inspect.Parameter.VAR_KEYWORD:
        return fn
    fields = []
    for field_name, info in model.model_fields.items():
        default = inspect.Parameter.empty if info.is_required() else info.get_default(call_default_factory=True)
        annotation = (
            info.annotation
            if info.description is None
            else Annotated[info.annotation, Field(description=info.description)]
        )
        fields.append(
            inspect.Parameter(field_name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)
        )

    def build(arguments: dict[str, Any]) -> Any:
        return model.model_validate(arguments, by_name=True)

    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def wrapper(**arguments: Any) -> Any:
            return await fn(build(arguments))

    else:

        @functools.wraps(fn)
        def wrapper(**arguments: Any) -> Any:
            return fn(build(arguments))

    wrapper.__signature__ = signature.replace(parameters=fields)  # type: ignore[attr-defined]
    return wrapper


def _tool_error(exc: Exception) -> ToolError:
    # The SDK keeps a crash's text on the server (right for a peer's code); these are the host
    # program's own functions, whose messages are written for their callers.
    return ToolError(f"{type(exc).__name__}: {exc}")


def function_server(functions: Sequence[Callable[..., Any]], *, name: str) -> MCPServer[Any]:
    """An SDK server with one tool per function, named after it.

    Raises:
        UsageError: a lambda or other nameless callable, two functions of one name, or a server
            name mcpmux would not accept.
    """
    if not is_valid_server_name(name):
        raise UsageError(f"{name!r} is not a server name", hint="use lowercase letters, digits, '_' and '-'")
    server: MCPServer[Any] = MCPServer(name, log_level="WARNING")
    seen: set[str] = set()
    for fn in functions:
        tool = getattr(fn, "__name__", "")
        if not tool or tool == "<lambda>" or not tool.isidentifier():
            raise UsageError(f"{fn!r} has no name to call it by", hint="pass a function defined with def")
        if tool in seen:
            raise UsageError(f"two functions are called {tool!r}", hint="rename one of them")
        seen.add(tool)
        description, params = parse_docstring(fn.__doc__)
        server.add_tool(_described(_flattened(fn), params), name=tool, description=description or None)
    return server
