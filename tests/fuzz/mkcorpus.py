#!/usr/bin/env python3
"""Write the seed corpora for the libFuzzer targets (standard library only).

    tests/fuzz/mkcorpus.py [OUT_DIR]    # default: corpus/ next to this file

The seeds are made in the modules beside this file: mkcorpus_devices.py for the virtio targets
(virtq, mmio, virtio_net, virtio_fs), mkcorpus_net.py for the network worker's (net_frame, dns,
net_policy, net_judge, tls_hello, egress_http) and mkcorpus_formats.py for the rest (layer,
registry_auth, fuse, share_spec, untar, share_rpc, secret_spec, api, files, state);
each says what its seeds are. Output is deterministic, so rerunning rewrites the same files.
"""
import os
import sys

from mkcorpus_devices import fs_seeds, mmio_seeds, net_seeds, virtq_seeds
from mkcorpus_formats import (api_seeds, files_seeds, fuse_seeds, layer_seeds,
                              registry_auth_seeds, secret_spec_seeds, share_rpc_seeds,
                              share_spec_seeds, state_seeds, untar_seeds)
from mkcorpus_net import (dns_seeds, egress_http_seeds, net_frame_seeds, net_judge_seeds,
                          net_policy_seeds, tls_hello_seeds)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "corpus")
    for name, seeds in (("virtq", virtq_seeds()), ("mmio", mmio_seeds()),
                        ("layer", layer_seeds()), ("registry_auth", registry_auth_seeds()),
                        ("virtio_net", net_seeds()), ("virtio_fs", fs_seeds()),
                        ("dns", dns_seeds()),
                        ("net_frame", net_frame_seeds()), ("net_policy", net_policy_seeds()),
                        ("net_judge", net_judge_seeds()), ("fuse", fuse_seeds()),
                        ("share_spec", share_spec_seeds()), ("untar", untar_seeds()),
                        ("share_rpc", share_rpc_seeds()), ("secret_spec", secret_spec_seeds()),
                        ("tls_hello", tls_hello_seeds()), ("egress_http", egress_http_seeds()),
                        ("api", api_seeds()), ("files", files_seeds()),
                        ("state", state_seeds())):
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        for seed, data in sorted(seeds.items()):
            with open(os.path.join(d, seed), "wb") as f:
                f.write(data)
        print(f"{name}: {len(seeds)} seeds in {d}")


if __name__ == "__main__":
    main()
