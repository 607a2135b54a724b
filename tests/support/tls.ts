// A throwaway certificate authority for TLS tests, made by openssl: the CA,
// and a server certificate for 127.0.0.1 that it signs.

import $ from "dax";

export interface TestCA {
  /** The CA certificate, PEM. */
  readonly ca: string;
  /** The server's certificate (signed by the CA) and key, PEM. */
  readonly cert: string;
  readonly key: string;
}

/** Why TLS tests cannot run here, or undefined when openssl is on PATH. */
export const noOpenssl: string | undefined = (() => {
  try {
    const r = new Deno.Command("openssl", { args: ["version"], stdout: "null", stderr: "null" })
      .outputSync();
    return r.success ? undefined : "openssl version failed";
  } catch {
    return "no openssl on this machine";
  }
})();

/** A new CA and a server certificate for IP 127.0.0.1, made in `dir`. */
export async function makeTestCA(dir: string): Promise<TestCA> {
  const p = (f: string) => `${dir}/${f}`;
  const openssl = (args: string[]) => $`openssl ${args}`.quiet();
  await openssl(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"].concat(
    ["-subj", "/CN=stratum-test-ca", "-keyout", p("ca.key"), "-out", p("ca.crt")],
  ));
  await openssl(["req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1"].concat(
    ["-keyout", p("server.key"), "-out", p("server.csr")],
  ));
  await Deno.writeTextFile(p("server.ext"), "subjectAltName=IP:127.0.0.1\n");
  await openssl(["x509", "-req", "-in", p("server.csr"), "-CA", p("ca.crt")].concat(
    ["-CAkey", p("ca.key"), "-CAcreateserial", "-days", "1", "-extfile", p("server.ext")],
    ["-out", p("server.crt")],
  ));
  return {
    ca: await Deno.readTextFile(p("ca.crt")),
    cert: await Deno.readTextFile(p("server.crt")),
    key: await Deno.readTextFile(p("server.key")),
  };
}

/** An Ed25519 key pair made by openssl, as an operator makes one: PEM private key and public key. */
export async function makeSigningKey(
  dir: string,
  name = "signing",
): Promise<{ key: string; pub: string }> {
  const key = `${dir}/${name}.key.pem`;
  const pub = `${dir}/${name}.pub.pem`;
  await $`openssl genpkey -algorithm ed25519 -out ${key}`.quiet();
  await $`openssl pkey -in ${key} -pubout -out ${pub}`.quiet();
  return { key, pub };
}
