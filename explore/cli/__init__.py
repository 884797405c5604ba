"""The ``lightpath`` command line: ``main`` plus one module per subcommand."""
from explore.cli.main import UserError, main, register

__all__ = ["main", "register", "UserError"]
