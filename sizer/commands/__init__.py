"""One module per command group; sizer/cli.py wires them."""
