"""Tests run from the repository root so shipped paths (studies/, tests/validation/) resolve."""
import os
from pathlib import Path

os.chdir(Path(__file__).resolve().parent.parent)
