"""The one config loader of batch runs (the workflows and the ``gpipe`` commands): a YAML config merged over a
workflow's defaults and ``key.sub=value`` overrides, checked against a table of ``section.key`` -> ``rule(key,
value)``, whose rules are gpipe's own checks (:mod:`gpipe._validate`) under the names the workflows use. A
``gpipe`` command's flags are keys of its config given on the command line: each flag's text goes to the key's rule
as it is (a rule of numbers reads a number written as text), named as the flag in the errors. Its public names are
:mod:`gpipe.workflow`'s."""

from __future__ import annotations

import copy
import inspect
import math
import os
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Any

import yaml

from ._validate import (
    check_bool,
    check_bytes,
    check_callable,
    check_choice,
    check_int,
    check_mapping,
    check_optional_int,
    check_probability,
    check_seed,
    check_text,
    check_texts,
    is_ascii_digits,
)
from .backend import DEVICES
from .errors import GpipeValueError

_Rule = Callable[[str, Any], Any]


def integer(minimum: int | None = None, maximum: int | None = None) -> _Rule:
    """The rule of a key whose value is an integer in ``minimum..maximum`` (either bound optional).

    Parameters
    ----------
    minimum, maximum : int, optional
        The bounds, inclusive.

    Returns
    -------
    callable
        ``rule(key, value)``: returns the value as an int, or raises :class:`GpipeValueError` naming the key.

    Raises
    ------
    GpipeValueError
        A bound is not an integer, or ``minimum > maximum``.

    Examples
    --------
    >>> from gpipe.workflow import integer
    >>> integer(minimum=1)("walks.length", 40)
    40
    """
    minimum = check_optional_int("minimum", minimum)
    maximum = check_optional_int("maximum", maximum)
    if minimum is not None and maximum is not None and minimum > maximum:
        raise GpipeValueError(f"'maximum' must be at least 'minimum' ({minimum}), got {maximum}")
    return lambda name, value: check_int(name, _number(value), minimum=minimum, maximum=maximum)


def number(name: str, value) -> float:
    """The rule of a key whose value is a positive finite number; returns it as a float, else raises
    :class:`GpipeValueError`.

    Examples
    --------
    >>> from gpipe.workflow import number
    >>> number("walks.params.p", "0.5")
    0.5
    """
    value = _number(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise GpipeValueError(f"'{name}' must be a positive finite number, got {value!r}")
    return float(value)


def probability(*, open_low: bool = False, open_high: bool = False) -> _Rule:
    """The rule of a key whose value is a probability: in [0, 1], either end open.

    Examples
    --------
    >>> from gpipe.workflow import probability
    >>> probability(open_high=True)("walks.params.restart", 0.15)
    0.15
    """
    open_low, open_high = check_bool("open_low", open_low), check_bool("open_high", open_high)
    return lambda name, value: check_probability(name, _number(value), open_low=open_low, open_high=open_high)


def one_of(choices: Iterable) -> _Rule:
    """The rule of a key whose value is one of ``choices``.

    Parameters
    ----------
    choices : iterable
        The values the key takes, named in the error.

    Returns
    -------
    callable
        ``rule(key, value)``: returns the value, or raises :class:`GpipeValueError` naming the key and the choices.

    Raises
    ------
    GpipeValueError
        ``choices`` is empty, a string (its characters would be the choices) or not iterable.

    Examples
    --------
    >>> from gpipe.workflow import one_of
    >>> one_of(("cpu", "gpu"))("cluster.device", "cpu")
    'cpu'
    """
    if isinstance(choices, str) or not isinstance(choices, Iterable) or not (choices := tuple(choices)):
        raise GpipeValueError(f"'choices' must be a non-empty iterable of values (not a string), got {choices!r}")
    return lambda name, value: check_choice(name, value, choices)


def seed(name: str, value) -> int:
    """The rule of a random seed: an integer in ``0..2**63-1``; returns it, else raises :class:`GpipeValueError`.

    Examples
    --------
    >>> from gpipe.workflow import seed
    >>> seed("walks.seed", 42)
    42
    """
    return check_seed(name, _number(value))


def boolean(name: str, value) -> bool:
    """The rule of a switch: true or false; returns it, else raises :class:`GpipeValueError`.

    Examples
    --------
    >>> from gpipe.workflow import boolean
    >>> boolean("mining.induced", True)
    True
    """
    return check_bool(name, value)


def byte_count(name: str, value) -> int | None:
    """The rule of a memory budget: null, or a byte count such as ``2000000000`` or ``'2 GB'``; returns it in bytes,
    else raises :class:`GpipeValueError`.

    Examples
    --------
    >>> from gpipe.workflow import byte_count
    >>> byte_count("mining.device_budget", "2 GB")
    2000000000
    """
    return None if value is None else check_bytes(name, value)


def mapping(name: str, value) -> dict:
    """The rule of a key whose value is a mapping (``walks.params``); returns it, else raises :class:`GpipeValueError`.

    Examples
    --------
    >>> from gpipe.workflow import mapping
    >>> mapping("walks.params", {"p": 0.5})
    {'p': 0.5}
    """
    return check_mapping(name, value)


def optional(rule: _Rule) -> _Rule:
    """The rule of a key that is None or follows ``rule``.

    Examples
    --------
    >>> from gpipe.workflow import integer, optional
    >>> optional(integer(minimum=1))("graph.partitions", None) is None
    True
    """
    check_callable("rule", rule)
    return lambda name, value: None if value is None else rule(name, value)



def _number(value):
    """``value``, or the int or float a text holds (a flag's value): a rule of numbers reads what it is given."""
    if not isinstance(value, str):
        return value
    for kind in (int, float):
        try:
            return kind(value)
        except ValueError:
            pass
    return value


def _check_rules(rules) -> Mapping[str, _Rule]:
    if not isinstance(rules, Mapping):
        raise GpipeValueError(f"'rules' must be a mapping of 'section.key' to rule(key, value), got {rules!r}")
    for key, rule in rules.items():
        if not isinstance(key, str) or not all(key.split(".")) or not callable(rule):
            raise GpipeValueError(f"'rules' must map each 'section.key' to a callable rule(key, value), got "
                                  f"{key!r}: {rule!r}")
    return rules


def _rmat_spec(text: str) -> tuple[int, ...] | None:
    """``(scale,)`` or ``(scale, edge_factor)`` for ``rmat:SCALE[:EDGE_FACTOR]``, else None."""
    fields = text.split(":")
    if fields[0] == "rmat" and len(fields) in (2, 3) and all(is_ascii_digits(f) and int(f) > 0 for f in fields[1:]):
        return tuple(map(int, fields[1:]))
    return None


def _graph_path(name: str, value) -> str:
    if _rmat_spec(check_text(name, value)) is None and not os.path.exists(value):
        raise GpipeValueError(f"'{name}' must be an existing edge file or graph folder, or rmat:SCALE[:EDGE_FACTOR] "
                              f"with positive integers, got {value!r}")
    return value


_positive = integer(minimum=1)

#: The keys every workflow's config has, each with the rule its value follows (``rule(key, value)`` raises
#: :class:`GpipeValueError` naming the key): the workflow's name, the graph, the output folder (written with
#: :func:`atomic_dir`; ``overwrite`` replaces an earlier run's) and the cluster.
#: A workflow's own table is ``{**RULES, "section.key": rule, ...}``; a key of the table is replaced whole when
#: configs are merged, a section (``graph``) is merged key by key.
RULES: Mapping[str, _Rule] = MappingProxyType({
    "workflow": check_text,
    "graph.path": _graph_path,
    "graph.directed": check_bool,
    "graph.partitions": optional(_positive),
    "output": check_text,
    "overwrite": check_bool,
    "cluster.scheduler_file": optional(check_text),
    "cluster.address": optional(check_text),
    "cluster.device": one_of(DEVICES),
    "cluster.n_workers": optional(_positive),
})


# -- configs ----------------------------------------------------------------------------------

def load_config(path: str | None, overrides: Iterable[str] = (), *, defaults: str | Mapping,
                rules: Mapping[str, _Rule], values: Mapping[str, Any] | None = None) -> dict:
    """The config at ``path`` merged over the ``defaults``, then the ``key.sub=value`` overrides, then ``values``.

    Sections are merged key by key; the value of a key of ``rules`` (a mapping such as ``walks.params``
    included) is replaced whole, while the override ``walks.params.p=0.5`` sets one entry of it.

    Parameters
    ----------
    path : str or None
        A YAML config holding the keys it changes; None for the defaults alone.
    overrides : iterable of str
        ``key.sub=value`` items, as ``--set`` takes them; each value is read as YAML.
    defaults : str or mapping
        The workflow's ``config.yaml``, which holds every key, or that config itself (a ``gpipe`` command's).
    rules : mapping
        The workflow's keys and their rules (see :data:`RULES`).
    values : mapping, optional
        ``section.key`` -> a value set whole, as it is (a ``gpipe`` command's flags: their text).

    Returns
    -------
    dict
        The merged config, not yet checked: see :func:`check_config`.

    Raises
    ------
    GpipeValueError
        A file is missing or is not YAML, ``path`` holds an unknown key (the message names the file and the
        key), an override is not ``key.sub=value``, or a parameter is not of the kind above.

    Examples
    --------
    >>> import os, tempfile
    >>> from gpipe.workflow import load_config
    >>> defaults = os.path.join(tempfile.mkdtemp(), "config.yaml")
    >>> with open(defaults, "w") as f:
    ...     _ = f.write("walks: {length: 40, params: {p: 1.0, q: 1.0}}\\n")
    >>> rules = {"walks.length": lambda name, value: value, "walks.params": lambda name, value: value}
    >>> load_config(None, ["walks.length=5", "walks.params.q=2"], defaults=defaults, rules=rules)
    {'walks': {'length': 5, 'params': {'p': 1.0, 'q': 2}}}
    """
    path = optional(check_text)("path", path)
    overrides = check_texts("overrides", overrides)
    rules = _check_rules(rules)
    values = check_mapping("values", {} if values is None else values)
    config = copy.deepcopy(dict(defaults)) if isinstance(defaults, Mapping) else _read_yaml(check_text("defaults",
                                                                                                       defaults))
    if path is not None:
        update = _read_yaml(path)
        try:
            _check_keys(update, "", rules, complete=False)
        except GpipeValueError as exc:
            raise GpipeValueError(f"{path}: {exc}") from None
        _merge(config, update, "", rules)
    for item in overrides:
        key, equals, text = item.partition("=")
        if not equals or not all(key.split(".")):
            raise GpipeValueError(f"'--set' must be key.sub=value, got {item!r}")
        try:
            value = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise GpipeValueError(f"'--set {item}': the value is not valid YAML ({' '.join(str(exc).split())})") \
                from None
        *sections, last = key.split(".")
        section = config
        for name in sections:
            if not isinstance(section.get(name), dict):
                section[name] = {}
            section = section[name]
        _merge(section, {last: value}, "".join(f"{name}." for name in sections), rules)
    for key, value in values.items():
        _check_keys(_nested(key, value), "", rules, complete=False)
        _merge(config, _nested(key, value), "", rules)
    return config


def check_config(config: dict, rules: Mapping[str, _Rule], names: Mapping[str, str] | None = None) -> dict:
    """Check that ``config`` has exactly the keys of ``rules`` and that each value follows its rule, which gives
    the value the config keeps (an int for a number given as text).

    Parameters
    ----------
    config : dict
        A config, as :func:`load_config` returns it.
    rules : mapping
        The workflow's keys (``section.key``) and their rules (see :data:`RULES`).
    names : mapping, optional
        ``section.key`` -> the name a rule's error gives the key (a ``gpipe`` command's flag); default the key.

    Returns
    -------
    dict
        ``config`` itself, each value as its rule returned it.

    Raises
    ------
    GpipeValueError
        The message names the key, the rule and the value; for an unknown key, the keys its section takes.

    Examples
    --------
    >>> from gpipe.workflow import check_config
    >>> check_config({"run": {"length": 3}}, {"run.length": lambda name, value: value})
    {'run': {'length': 3}}
    """
    rules = _check_rules(rules)
    names = check_mapping("names", {} if names is None else names)
    _check_keys(config, "", rules)
    for key, rule in rules.items():
        *sections, last = key.split(".")
        section = config
        for name in sections:
            section = section[name]
        section[last] = rule(names.get(key, key), section[last])
    return config


def check_params(key: str, function: Callable, params: dict, set_by_workflow: Iterable[str]) -> None:
    """Check that every name in ``params`` (the config's ``key`` section) is a parameter of ``function`` that the
    workflow does not set itself.

    Raises
    ------
    GpipeValueError
        ``unknown key 'key.name'``, saying which parameters ``function`` takes.

    Examples
    --------
    >>> from gpipe.workflow import check_params
    >>> check_params("walks.params", gpipe.walks.node2vec, {"p": 0.5}, ("g", "seed"))
    >>> check_params("walks.params", gpipe.walks.deepwalk, {"q": 2}, ("g", "seed", "length", "walks_per_vertex",
    ...                                                                "start", "progress", "weighted", "edge_dir"))
    Traceback (most recent call last):
    ...
    gpipe.errors.GpipeValueError: unknown key 'walks.params.q': deepwalk takes no extra parameters
    """
    accepted = [p for p in inspect.signature(function).parameters if p not in set_by_workflow]
    for name in params:
        if name not in accepted:
            raise GpipeValueError(f"unknown key '{key}.{name}': {function.__name__} takes "
                                  f"{', '.join(accepted) or 'no extra parameters'}")


def _check_keys(section, prefix: str, rules: Mapping[str, _Rule], complete: bool = True) -> None:
    """Every key under ``prefix`` is known and, when ``complete``, present, recursively."""
    check_mapping(prefix.rstrip(".") or "config", section)
    known = list(dict.fromkeys(k[len(prefix):].split(".")[0] for k in rules if k.startswith(prefix)))
    for key in section:
        if key not in known:
            takes = f"'{prefix.rstrip('.')}' takes" if prefix else "the config takes"
            raise GpipeValueError(f"unknown key '{prefix}{key}': {takes} {', '.join(known)}")
    for key in known:
        if key not in section:
            if complete:
                raise GpipeValueError(f"missing key '{prefix}{key}'")
        elif prefix + key not in rules:
            _check_keys(section[key], f"{prefix}{key}.", rules, complete)


def _nested(key: str, value) -> dict:
    """``{'a': {'b': value}}`` for the key ``'a.b'``."""
    for name in reversed(key.split(".")):
        value = {name: value}
    return value


def _read_yaml(path: str | os.PathLike) -> dict:
    try:
        with open(path) as f:
            config = yaml.safe_load(f)
    except FileNotFoundError:
        raise GpipeValueError(f"the config file {os.fspath(path)!r} does not exist") from None
    except yaml.YAMLError as exc:
        raise GpipeValueError(f"{os.fspath(path)}: not valid YAML ({' '.join(str(exc).split())})") from None
    return check_mapping(os.fspath(path), {} if config is None else config)


def _merge(base: dict, update: dict, prefix: str, rules: Mapping[str, _Rule]) -> None:
    """Merge ``update`` into ``base`` (at ``prefix``), section by section; a key of ``rules`` is replaced whole."""
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict) and prefix + key not in rules:
            _merge(base[key], value, f"{prefix}{key}.", rules)
        else:
            base[key] = value
