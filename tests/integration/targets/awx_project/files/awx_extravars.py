# Copyright: (c) 2026, gpuops maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Write a job's extra variables as AWX writes them into env/extravars: YAML in which every string (keys and values,
at any depth) is tagged !unsafe, as awx/main/utils/safe_yaml.py's SafeStringDumper does. ansible-core 2.19 reads
!unsafe '' as None (ansible/awx#16205): an empty survey answer reaches the playbook as None.

    awx_extravars.py JSON_IN YAML_OUT
"""

import json
import sys

import yaml


class SafeStringDumper(yaml.SafeDumper):
    def represent_data(self, data):
        if isinstance(data, str):
            return self.represent_scalar("!unsafe", data)
        return super().represent_data(data)


def main(source, destination):
    with open(source, encoding="utf-8") as handle:
        extra_vars = json.load(handle)
    text = yaml.dump_all([extra_vars], Dumper=SafeStringDumper, default_flow_style=False, allow_unicode=True)
    with open(destination, "w", encoding="utf-8") as handle:
        handle.write(text)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
