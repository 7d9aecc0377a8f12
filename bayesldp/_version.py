"""The package's version, in a module of its own: the modules that record it in their outputs
import it from here, not from the package (whose lazy names would make an import circle)."""

__version__ = "0.1.0"
