"""Search spaces: declarative, data-only definitions of the configs a kernel may be tuned over.

A space lives in ``search_spaces/<name>.yaml`` (or inline, as the same mapping, in a kernel file)::

    name: gemm_fp8            # required, non-empty string
    description: ...          # optional free text (not part of the hash)
    params:                   # required, non-empty ordered mapping; order = enumeration order
      BLOCK_M: [64, 128]                   # categorical: a list of ints, floats, strings or bools
      BLOCK_N: {values: [64, 128, 256]}    # the same, long form
      BLOCK_K: {pow2: [32, 256]}           # 32, 64, 128, 256 (both bounds powers of two, low <= high)
      GROUP_M: {range: [1, 16], step: 1}   # low, low+step, ... up to high inclusive (ints; step default 1)
      num_stages: [3, 4, 5]
      USE_TMA: bool                        # [false, true]; also {bool: true}
      TMA_MULTICAST: {values: [1, 2], when: "USE_TMA"}   # conditional parameter
    constraints:              # optional list: a string, or {expr: ..., name: ..., when: ...}
      - "num_stages * (BLOCK_M + BLOCK_N) * BLOCK_K <= smem_per_block"
      - {name: split_k_fits, expr: "SPLIT_K == 1 or BLOCK_K * SPLIT_K <= 4096"}

Rules:

- Param names are Python identifiers (expressions refer to them) and may not be device-fact names.
  Param and constraint names are at most ``MAX_NAME_CHARS`` (200) characters.
- Choices are finite (at most ``MAX_CHOICES`` per param), non-empty, without duplicates (``1`` and
  ``1.0`` are duplicates, ``true`` and ``1`` are not); floats must be finite; null is not a choice.
- Every long form also takes ``when``. A ``when`` may use params declared *before* its param and device
  facts. A param whose ``when`` is false is *inactive*: it is absent from the config. So is a param whose
  ``when`` uses a param that is itself inactive.
- A config is valid when every constraint holds. A constraint that uses (in ``expr`` or ``when``) a param
  absent from the config is skipped for that config (counts as satisfied). A constraint's ``when``
  limits it to configs where the ``when`` is true. A constraint that raises while evaluated (division by
  zero, ``log2(0)``, comparing a string with a number, ...) makes the config invalid with that reason.

Expressions are parsed with :mod:`ast` and interpreted by closures built from a whitelist (``expr.py``); user
text is never passed to ``eval``/``exec``/``compile``. Allowed: int/float/bool literals and string
literals (to compare with string choices), names (the space's params and the device facts of
``autotune.env.FACT_NAMES``), ``+ - * / // % **`` (exponent at most 64 in magnitude, integer results at
most 4096 bits; arithmetic on strings is an evaluation error), unary ``- + not``, comparisons ``== != <
<= > >=`` (chained too), ``and``/``or``, ``x if c else y``, and calls to ``min max abs ceil floor log2``.
Booleans are Python's ``True``/``False``. Anything else (attributes, subscripts, lambdas,
comprehensions, other calls, ``in``/``is``, bit operators), unknown names and syntax errors are
rejected when the space is loaded, with a :class:`SpaceError` naming the source and the param or
constraint.

YAML reads unquoted ``on``/``off``/``yes``/``no`` as booleans: quote them to mean strings.

API: :func:`load_space_dict` (file -> raw mapping), :meth:`Space.from_dict` / :meth:`Space.from_yaml` /
:func:`load_space` (validated :class:`Space`), then ``size_unconstrained``/``size_info``/``enumerable`` for
the size, ``enumerate``/``count`` (small spaces) and ``sample``/``sample_unique``/``find_valid`` (any
size) over valid configs, ``check``/``is_valid``/``normalize`` for one config, ``to_dict``/``hash`` for
identity. ``facts`` is a
plain ``{name: int}`` mapping (``autotune.env.device_facts`` or ``DEVICE_PRESETS``); a fact an
expression needs but ``facts`` lacks is a :class:`SpaceError`.

Identity: :meth:`Space.hash` is the sha256 of the canonical JSON of the normalized definition (name,
params in order with their choices and ``when``, constraints with explicit names), expressions written
in canonical form (``ast.unparse``). YAML formatting, comments, spacing inside expressions, the
short/long spelling of a param and ``description`` do not change it; a choice, an order, a ``when`` or
a constraint does.

Size limits (so that no space file, however large or hostile, can hang or exhaust memory):

- ``MAX_ENUMERATE`` (1,000,000) combinations *before constraints* is the most that :meth:`Space.count`
  (and :meth:`Space.enumerate` given ``limit=``) will walk; past it they raise :class:`SpaceError` saying
  how big the space is. :meth:`Space.size_unconstrained` is computed without enumerating (a product over
  params; conditionals counted exactly by a memoized count, or bounded above by the plain product when
  that count would take more than ``SIZE_STEP_BUDGET`` steps). A search enumerates a space only when
  :meth:`Space.enumerable` (size at most ``MAX_ENUMERATE``) and samples a larger one
  (:meth:`Space.sample`, :meth:`Space.sample_unique`: rejection sampling, never the full product).
- :meth:`Space.find_valid` finds a valid config, or shows there is none, in bounded time (in order with
  pruning for ``FIND_NODE_BUDGET`` choices tried, then ``FIND_TRIES`` random tries, at most
  ``FIND_TIME_BUDGET_S`` seconds): an unsatisfiable huge space is an error, not a hang.
- At most ``MAX_PARAMS`` params. YAML files: at most ``MAX_FILE_BYTES``, nesting at most
  ``MAX_YAML_DEPTH`` deep, at most ``MAX_YAML_NODES`` nodes once aliases are expanded (an "alias bomb"
  is refused in milliseconds), no recursive aliases.
- Error messages quote user values shortened (``messages._short``): one line, never a whole structure.

Modules: ``expr`` (the safe expression evaluator), ``params`` (params, constraints, parsing a
definition), ``space`` (:class:`Space`: identity and one config), ``walk`` (enumeration, size, sampling,
``find_valid``), ``load`` (YAML files, where spaces are looked for), ``messages`` (how user values
appear in errors), ``triton`` (a ``triton.Config`` list as a space, and back).
"""

from autotune.space.load import default_space_dirs, load_space, load_space_dict
from autotune.space.messages import format_count
from autotune.space.params import Constraint, Param
from autotune.space.space import Space
from autotune.space.walk import MAX_ENUMERATE

__all__ = [
    "MAX_ENUMERATE",
    "Constraint",
    "Param",
    "Space",
    "default_space_dirs",
    "format_count",
    "load_space",
    "load_space_dict",
]
