"""`sparktui init`'s interactive screen: pick the head, the interface, the image, the model and the recipe
from what discovery found, see the config change as you pick, write it (``w``) or leave (``Esc``).

It only chooses: the config itself is ``sparktui.domain.init_setup.propose_config`` for the picked
options, the same function ``--yes`` uses, so both ways give the same file for the same choices.
"""

from __future__ import annotations

import dataclasses
import tomllib
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Button, Footer, Label, Select, Static

from sparktui.config import ConfigError, parse_config
from sparktui.domain.init_setup import (
    DiscoveredHost,
    InitOptions,
    Proposal,
    find_model,
    image_choices,
    interface_choices,
    model_choices,
    node_name,
    propose_config,
    render_toml,
)

#: The Select value meaning "let init decide".
AUTO = "__auto__"
#: The recipe Select's value for "no recipe".
NONE = "__none__"


class InitApp(App[InitOptions | None]):
    """Returns the picked ``InitOptions`` (``None`` when left without writing)."""

    TITLE = "sparktui init"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("w", "write", "Write config", id="init.write"),
        Binding("escape,q", "leave", "Leave without writing", id="init.leave"),
    ]
    DEFAULT_CSS = """
    #picks { width: 52; padding: 0 1; }
    #picks Label { margin-top: 1; }
    #preview { border: round $accent; padding: 0 1; }
    #notes { color: $warning; height: auto; }
    #buttons { height: auto; margin-top: 1; }
    #buttons Button { margin-right: 1; }
    """

    def __init__(self, hosts: Sequence[DiscoveredHost], opts: InitOptions, recipes: Mapping[str, Any],
                 output: str) -> None:
        super().__init__()
        self.hosts = list(hosts)
        self.opts = opts
        self.recipes = dict(recipes)
        self.output = output
        taken: set[str] = set()
        self.names = [node_name(h, taken) for h in self.hosts]

    def compose(self) -> ComposeResult:
        def select(widget_id: str, pairs: list[tuple[str, str]], value: str | None) -> Select[str]:
            choices = [("(let init decide)", AUTO), *pairs]
            known = {v for _, v in choices}
            return Select(choices, value=value if value in known else AUTO, allow_blank=False, id=widget_id)

        head = self.opts.head if self.opts.head in self.names else self.names[0]
        images = [(f"{i.ref}  (vLLM {i.vllm})", i.ref) for i in image_choices(self.hosts)]
        models, model = self._model_picks()
        with Horizontal():
            with Vertical(id="picks"):
                yield Label("Head node (runs the Ray head and vllm serve)")
                yield Select([(n, n) for n in self.names], value=head, allow_blank=False, id="pick-head")
                yield Label("Interface for Ray, Gloo and NCCL sockets")
                yield select("pick-interface", [(n, n) for n in interface_choices(self.hosts)],
                             self.opts.interface)
                yield Label("Image (one image ID on every node)")
                yield select("pick-image", images, self.opts.image)
                yield Label("Model (on every node)")
                yield select("pick-model", models, model)
                yield Label("Recipe")
                yield select("pick-recipe", [("(none)", NONE), *[(rid, rid) for rid in sorted(self.recipes)]],
                             NONE if self.opts.recipe == "" else self.opts.recipe)
                yield Static("", id="notes", markup=False)
                with Horizontal(id="buttons"):
                    yield Button(f"Write {self.output} (w)", id="write", variant="success")
                    yield Button("Leave (Esc)", id="leave")
            with VerticalScroll(id="preview"):
                # TOML's [tables] would read as Rich markup.
                yield Static("", id="toml", markup=False)
        yield Footer()

    def _model_picks(self) -> tuple[list[tuple[str, str]], str | None]:
        """The model dropdown's entries and the one picked at first. ``--model`` is kept: the scanned model
        it names, else an entry of its own (a path or an HF id the scan did not find is still a model)."""
        found = model_choices(self.hosts)
        picks = [(f"{m.name}  ({m.weights_bytes / 2**30:.1f} GiB)", m.path) for m in found]
        wanted = self.opts.model
        if not wanted:
            return picks, None
        listed = find_model(found, wanted)
        if listed is not None:
            return picks, listed.path
        return [(f"{wanted}  (--model)", wanted), *picks], wanted

    def on_mount(self) -> None:
        self._refresh_preview()

    def picked(self) -> InitOptions:
        def value(widget_id: str) -> str | None:
            v = self.query_one(f"#{widget_id}", Select).value
            return None if v in (AUTO, Select.BLANK) else str(v)

        recipe = value("pick-recipe")
        return dataclasses.replace(self.opts, head=value("pick-head"), interface=value("pick-interface"),
                                   image=value("pick-image"), model=value("pick-model"),
                                   recipe="" if recipe == NONE else recipe)

    def proposal(self) -> Proposal:
        return propose_config(self.hosts, self.picked(), self.recipes)

    def _refresh_preview(self) -> None:
        p = self.proposal()
        self.query_one("#toml", Static).update(render_toml(p.data, p.comments))
        lines = [f"note: {n}" for n in p.notes] + [f"warning: {w}" for w in p.warnings]
        self.query_one("#notes", Static).update("\n".join(lines))

    def on_select_changed(self, event: Select.Changed) -> None:
        event.stop()
        self._refresh_preview()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "write":
            self.action_write()
        else:
            self.action_leave()

    def action_write(self) -> None:
        # Checked here, as `init` checks it before writing: a config that does not validate (no model
        # found, a bad --set) is said while the picks can still be changed, not after the screen is gone.
        p = self.proposal()
        try:
            parse_config(tomllib.loads(render_toml(p.data, p.comments)), self.output)
        except ConfigError as exc:
            # The file is not written yet: its path in each line would say nothing.
            faults = "\n".join(f"  {problem.key_path}: {problem.fault}" for problem in exc.problems)
            self.query_one("#notes", Static).update(
                f"not written: the config does not validate (change a pick, or leave and pass --model / "
                f"--set):\n{faults}")
            return
        self.exit(self.picked())

    def action_leave(self) -> None:
        self.exit(None)
