"""Compilers that are not one of DSPy's own teleprompters (the rest are still at the package's
top level: `annotated`, `judge`, `path_judge`, `settings_search`)."""

from treeqa.teleprompt.recorded import RecordedReader, reader_of, record_reads

__all__ = ["RecordedReader", "reader_of", "record_reads"]
