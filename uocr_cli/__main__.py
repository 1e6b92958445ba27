"""``python -m uocr_cli``: the same command as the ``uocr`` script."""

from uocr_cli.main import main

main()
