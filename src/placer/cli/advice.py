"""What the command line adds to a library's error. The library states facts: what is wrong, with
which item, naming its own parameter (``cluster``, ``sim``, ``method``) and a ``kind``; here each
kind gets the option that carried the value and advice in the command line's words (a flag, a
command to run). :func:`line` is what the guard prints for every :class:`InputError`."""

from __future__ import annotations

from placer.errors import InputError
from placer.io import MAX_INPUT_ENV

# a library parameter -> the option that carries it (in ``where`` of an error with a kind)
OPTIONS = {"cluster": "--cluster", "sim": "--sim", "method": "--method", "methods": "--methods", "map": "--map",
           "html": "--html", "apply": "--apply", "allowed": "--allow-code"}

# a graph without module paths: how the command line captures one with them
CAPTURE = "capture the model from PyTorch (placer capture, hf:NAME, the zoo) for module-level placement"

# an error's kind -> the command line's advice, in place of the library's
FIXES = {
    "cluster-gpus": "give a cluster with as many GPUs (--cluster)",
    "cluster-cpu": "give a cluster with a CPU (--cluster), or map the module to a GPU",
    "pipeline-order": "export it as --format device-map (placer.apply runs any module-level placement), or place "
                      "contiguous stages (--method param-balanced, or --objective pipeline)",
    "pipeline-tie": "export it as --format device-map (placer.apply runs any module-level placement)",
    "input-limit": f"raise the limit with `placer --max-input-size 2GiB ...` or ${MAX_INPUT_ENV} if the file is genuine",
    "input-dtype": "give each input the dtype the model expects (e.g. --input 3x32x32 for float32, SHAPE:int64:HIGH "
                   "only for token ids)",
    "inputs": "give inputs as SHAPE[:DTYPE] (--input) or return (module, inputs) from the factory",
    "encoder": "give the encoder `placer pretrain --out` wrote",
    "recipe": "capture the model with `placer capture` (or use the zoo, hf:NAME)",
    "not-executable": "run graphs captured from PyTorch (`placer capture`, the zoo, hf:NAME)",
    "apply-map": "give the output of `placer export --format device-map` (its file, its document or a dict)",
    "device-map": "give it as --placement with the graph it maps, or `placer convert MAP.json OUT.json --graph GRAPH "
                  "--cluster CLUSTER` for a placement file",
    # placer.runtime.trust: a graph file's recipe, before `placer run` imports or builds anything
    "trust:installation": "capture your own model (`placer capture FILE.py:FUNCTION`); placer's built-in models are "
                          "zoo and hf: graphs",  # no flag lifts this refusal, so none is named
    "recipe-data": "capture the model again with `placer capture`",
    "recipe-seed": "capture the model again with `placer capture --seed N`",
    "recipe-tokens": "capture the model again with a smaller --batch or --seq",
    "input-size": "use a smaller --batch or input shape",
}

# an error's kind -> what the command line adds after the advice
SEE = {"method": " (see `placer methods`)"}


def for_command_line(e: InputError) -> InputError:
    """``e`` as the command line says it: the option in place of the library's parameter (an example
    of the value made an example of the option), its advice in place of the library's; unchanged
    for an error without a kind."""
    if not e.kind:
        return e
    where, fix = e.where, e.fix
    param = where.partition(" ")[0]  # "cluster here": the parameter and what of it
    if param in OPTIONS and e.kind in (param, param.rstrip("s")):  # "methods": a list of kind "method"
        where = OPTIONS[param] + where[len(param):]
        if fix.startswith("e.g. "):
            fix = f"e.g. {OPTIONS[param]} {fix[5:]}"
    if e.kind in ("no-module-map", "no-module-paths"):
        from placer.grouping.modules import NO_MODULES_FIX

        fix = fix.replace(NO_MODULES_FIX, CAPTURE).replace("use the placement itself",
                                                           "use the placement file itself (placer optimize -o)")
    if e.kind.startswith("policy:"):  # a policy state that is not one: the command that writes one
        fix = f"give the file `placer policy train -m {e.kind[7:]} --out` wrote, or train it again"
    if e.kind.startswith("trust:code:"):  # recipe code outside the allowed folders: the flag that allows its folder
        fix = f"if you trust this graph file, add --allow-code {e.kind[11:]}"
    fix = FIXES.get(e.kind, fix) + SEE.get(e.kind, "")
    return e.advised(fix, where)


def line(e: InputError) -> str:
    """The one line the command line prints for ``e``."""
    return str(for_command_line(e))


def module_split(e: InputError, graph: str, depth: int) -> InputError:
    """A placement that splits a module (kind ``module-split``) told how to get one that does not,
    with the command's own graph argument and depth; any other error unchanged."""
    if e.kind != "module-split":
        return e
    return e.advised(f"get a module-level placement with `placer optimize {graph} --grouping module:{depth}` (or "
                     f"`--method accelerate-auto` / `param-balanced`), or export it at a shallower depth (--depth)")
