// axios as agents use it: no proxy code. It reads HTTPS_PROXY itself (proxy-from-env) and
// trusts NODE_EXTRA_CA_CERTS through Node's TLS, so plain `freezeframe exec` records it.
import axios from "axios";

const answer = await axios.get(`${process.argv[2]}/tool/counter?via=axios`);
console.log(JSON.stringify(answer.data));
