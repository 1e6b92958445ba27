"""A model that writes a given script, for driving the real engine path with real-shaped output.

The engine runs unchanged (preprocessing, vision tower, prefill and decode over the block pool,
scheduler, page guard, split, parser, results); only the logits each step are replaced by the
script's wish, so a test can say exactly what "the model" writes and check what each page gets.

A script is the text of each section as the real model writes it (``<PAGE>`` then the page's
det blocks), tokenised with the checkpoint's byte-level tokenizer. The scripted model follows
its script section by section, the way a real model conditions on its own output: after every
``<PAGE>`` in the output (its own, or one the guard forced) it writes the next section. Its
second choice is always the first id of ``<PAGE>``, which is what a ban makes it write.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from ocr_worker.engines.unlimited_ocr.output.page_guard import PAGE_MARKER
from ocr_worker.engines.unlimited_ocr.runtime.engine import UnlimitedOcrEngine
from ocr_worker.engines.unlimited_ocr.workspace.sequence import Sequence


@dataclass
class Script:
    """What the model writes for one page group: ``preamble`` before the first marker, then
    one section per entry of ``sections`` (a marker opens each), then EOS. A section in
    ``loops`` is written over and over, never ending by itself."""

    sections: list[str]
    preamble: str = ""
    loops: set[int] = field(default_factory=set)
    framed: bool = True  # False: one page on its own, no markers


class ScriptedModel:
    def __init__(self, engine: UnlimitedOcrEngine, scripts: dict[str, Script]) -> None:
        self.engine, self.scripts = engine, scripts
        self.tokenizer = engine.tokenizer
        runner = engine.loop.scheduler.runner
        # The script follows the output as the host has read it: each step's tokens are read
        # before the next step runs (the scheduler's overlap would feed it one token late).
        engine.loop.scheduler.overlap = False
        prefill_many, decode, feed = runner.prefill_many, runner.decode, runner.feed_generated
        self.vocab = runner.lm_head.out_features

        def scripted_prefill_many(items):  # type: ignore[no-untyped-def]
            return self._logits([sequence for sequence, _, _ in items], prefill_many(items))

        def scripted_decode(sequences, tokens=None):  # type: ignore[no-untyped-def]
            return self._logits(sequences, decode(sequences, tokens))

        def scripted_feed(sequence, ids):  # type: ignore[no-untyped-def]
            return self._logits([sequence], feed(sequence, ids)[None])[0]

        runner.prefill_many, runner.decode = scripted_prefill_many, scripted_decode  # type: ignore[method-assign]
        runner.feed_generated = scripted_feed  # type: ignore[method-assign]

    def _ids(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False).ids)

    def _logits(self, sequences: list[Sequence], real: torch.Tensor) -> torch.Tensor:
        logits = torch.zeros_like(real)
        marker = self._ids(PAGE_MARKER)
        for row, sequence in enumerate(sequences):
            logits[row, marker[0]] = 5.0  # the runner-up: open the next page
            logits[row, self._wish(sequence)] = 10.0
        return logits

    def _wish(self, sequence: Sequence) -> int:
        """The next id of the script, given what has been written so far."""
        script = self.scripts[sequence.seq_id]
        section, written = self._position(sequence.generated, script.framed)
        eos = self.engine.eos_id
        if section < 0:  # before the first marker: the preamble, then the marker
            stream = self._ids(script.preamble + PAGE_MARKER)
        elif section >= len(script.sections):
            return eos  # the model thinks the document is over
        else:
            body = self._ids(script.sections[section])
            if section in script.loops:
                return body[written % len(body)]
            last = section == len(script.sections) - 1 or not script.framed
            stream = body + ([eos] if last else self._ids(PAGE_MARKER))
        return stream[min(written, len(stream) - 1)]

    def _position(self, generated: list[int], framed: bool) -> tuple[int, int]:
        """(section index, ids written in it): each "<PAGE>" in the output opens a section."""
        if not framed:
            return 0, len(generated)
        section, written, tail = -1, 0, ""
        for token in generated:
            tail += self.tokenizer.decode([token], skip_special_tokens=False)
            written += 1
            if PAGE_MARKER in tail:
                section, written, tail = section + tail.count(PAGE_MARKER), 0, ""
            tail = tail[-(len(PAGE_MARKER) - 1) :]
        return section, written
