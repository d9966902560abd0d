"""Serving programs over HTTP (`treeqa serve`) and viewing finished runs (`treeqa view`)."""

from treeqa.serving.app import Served, create_app, program_info
from treeqa.serving.view import write_view

__all__ = ["Served", "create_app", "program_info", "write_view"]
