"""Every kind of recipe (:mod:`placer.frontends.recipe`) built and traced through one dispatch.

User factories and Hugging Face models are frontends; zoo models are built by :mod:`placer.zoo`,
which sits above the frontends, so the dispatch over all three kinds lives here, above both (as
:mod:`placer.resolve` does for graph names). :mod:`placer.runtime` rebuilds a graph's model with
:func:`build` from :func:`recipe_of`; ``placer capture`` traces one with :func:`capture_recipe`.
"""

from __future__ import annotations

from placer.errors import InputError
from placer.frontends.recipe import build_factory, capture_with, loss_function


def build(recipe: dict, device: str = "cpu"):
    """``(module, inputs, loss_fn)`` of any recipe, on ``device`` (``meta`` for capture only)."""
    import torch

    kind = recipe.get("kind")
    if kind == "factory":
        m, xs = build_factory(recipe, device)
        return m, xs, loss_function(recipe.get("loss", "auto"))
    if kind == "hf":
        from placer.frontends.hf import build_hf

        return build_hf(recipe, device)
    if kind == "zoo":
        from placer.zoo.models import build_model

        torch.manual_seed(int(recipe.get("seed", 0)))
        m, xs = build_model(recipe["name"], device=device, **recipe.get("overrides", {}))
        return m, list(xs), loss_function(recipe.get("loss", "auto"))
    raise InputError("recipe", f"kind {kind!r}", "is not a known recipe", "give a recipe of kind factory, hf or zoo "
                     "(one that capturing a model writes)", kind="recipe")


def recipe_of(graph) -> dict | None:
    """The recipe stored with a graph (zoo graphs carry theirs in ``meta['zoo']``), else None."""
    meta = graph.meta or {}
    if isinstance(meta.get("recipe"), dict):
        return meta["recipe"]
    zoo = meta.get("zoo")
    if isinstance(zoo, dict) and meta.get("source") == "torch":
        from placer.zoo.models import ZOO

        base = ZOO[zoo["model"]].config if zoo.get("model") in ZOO else {}
        over = {k: v for k, v in (zoo.get("config") or {}).items() if base.get(k, object()) != v}
        return {"kind": "zoo", "name": zoo["model"], "overrides": over, "optimizer": meta.get("optimizer") or "sgd-momentum",
                "loss": "auto", "seed": 0}
    return None


def capture_recipe(recipe: dict, name: str | None = None, device: str | None = None):
    """Build the recipe's model and trace its training step (:func:`placer.frontends.recipe.capture_with`)."""
    return capture_with(recipe, build, name, device)
