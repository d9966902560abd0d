"""Where treeqa writes by default: beside a source checkout, or, installed as a package, the
user's cache folder and the working folder, never inside site-packages."""

from treeqa.settings import default_cache_dir, default_runs_dir, in_checkout


def test_a_checkout_keeps_its_cache_and_runs_beside_it(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'treeqa'\n")
    assert in_checkout(tmp_path)
    assert default_cache_dir(tmp_path) == tmp_path / ".cache"
    assert default_runs_dir(tmp_path) == tmp_path / "runs"


def test_an_installed_package_writes_to_the_users_cache_and_the_working_folder(tmp_path, monkeypatch):
    site_packages = tmp_path / "site-packages"
    site_packages.mkdir()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.chdir(tmp_path)
    assert not in_checkout(site_packages)
    assert default_cache_dir(site_packages) == tmp_path / "xdg" / "treeqa"
    assert default_runs_dir(site_packages) == tmp_path / "runs"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_cache_dir(site_packages) == tmp_path / "home" / ".cache" / "treeqa"
