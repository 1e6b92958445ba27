"""One step on the card: the model runner's decode step and prefill pass, fused, graphed, and
the rules that choose what a step reads (R-SWA, SR-SWA) and what it emits."""
