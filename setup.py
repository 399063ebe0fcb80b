"Packaging for dphpe: every field comes from settings.ini (nbdev 2 convention)."
import os
from configparser import ConfigParser
import setuptools
from setuptools.command.build_py import build_py

cfg = ConfigParser(delimiters=['='])
cfg.read('settings.ini', encoding='utf-8')
cfg = cfg['DEFAULT']
licenses = {'apache2': ('Apache Software License 2.0', 'OSI Approved :: Apache Software License')}
lic = licenses[cfg['license']]
statuses = ['1 - Planning', '2 - Pre-Alpha', '3 - Alpha', '4 - Beta', '5 - Production/Stable']
reqs = cfg.get('requirements', '').split()
dev_reqs = cfg.get('dev_requirements', '').split()
scripts = [o.strip() for o in cfg.get('console_scripts', '').split(',') if o.strip()]

class BuildWithExperiment(build_py):
    "Build the package with the experiment notebook inside it (`dphpe/experiment.ipynb`): `dphpe run` needs no checkout."
    def run(self):
        super().run()
        if not getattr(self, 'editable_mode', False):  # an editable install reads nbs/ in the checkout itself
            self.copy_file(os.path.join('nbs', '10_experiment.ipynb'), os.path.join(self.build_lib, 'dphpe', 'experiment.ipynb'))

setuptools.setup(
    name=cfg['lib_name'], version=cfg['version'], description=cfg['description'],
    license=lic[0], author=cfg['author'], author_email=cfg['author_email'],
    url=cfg['git_url'], keywords=cfg['keywords'].split(),
    classifiers=[f"Development Status :: {statuses[int(cfg['status'])]}",
                 f"Intended Audience :: {cfg['audience']}", f"License :: {lic[1]}",
                 f"Natural Language :: {cfg['language']}", f"Programming Language :: Python :: 3.11"],
    packages=setuptools.find_packages(include=['dphpe', 'dphpe.*']),
    include_package_data=True, python_requires=f">={cfg['min_python']}",
    install_requires=reqs, extras_require={'dev': dev_reqs},
    long_description=open('README.md', encoding='utf-8').read(), long_description_content_type='text/markdown',
    zip_safe=False, cmdclass={'build_py': BuildWithExperiment}, entry_points={'console_scripts': scripts, 'nbdev': [f"{cfg['lib_name']}={cfg['lib_name']}._modidx:d"]},
)
