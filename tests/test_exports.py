"""Every module of the package imports, and every name in its `__all__` exists (nbdev writes `__all__` from the
notebooks' exported cells, so a name renamed in one place and not the other fails here)."""
import importlib, pkgutil
import pytest
import dphpe

MODULES = sorted(m.name for m in pkgutil.walk_packages(dphpe.__path__, 'dphpe.'))

def test_modules_found():
    assert {'dphpe.report.collect', 'dphpe.report.write', 'dphpe.cli'} <= set(MODULES)

@pytest.mark.parametrize('name', MODULES)
def test_all_names_exist(name):
    module = importlib.import_module(name)
    missing = [n for n in getattr(module, '__all__', []) if not hasattr(module, n)]
    assert not missing, f"{name}.__all__ names what it does not define: {missing}"
