"""Serving programs over HTTP (`treeqa serve`) and viewing finished runs (`treeqa view`)."""

from treeqa.serving.app import Served, allowed_hosts_for, create_app, program_info
from treeqa.serving.view import write_view

__all__ = ["Served", "allowed_hosts_for", "create_app", "program_info", "write_view"]
