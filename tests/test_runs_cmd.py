"""`scoville sql` / `ls` print data as given: a cell is never read as Rich markup."""

import typer
from typer.testing import CliRunner

from scoville.cli import runs_cmd


def test_sql_cells_and_headers_with_brackets_print_as_given(tmp_path):
    app = typer.Typer()
    runs_cmd.register(app)
    r = CliRunner().invoke(app, ["sql", "SELECT 'a[b]c' AS \"col[i]\"", "--runs", str(tmp_path)])
    assert r.exit_code == 0, r.output
    assert "a[b]c" in r.output and "col[i]" in r.output
