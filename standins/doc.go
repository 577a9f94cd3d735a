// Package standins is the root of the stand-ins: real programs and
// helpers that play the parts of systems outside Metallo, for the tests
// and for make demo (deploy/demo), which uses them for real work and
// imports no test harness (docs/testing.md#what-is-real-and-what-is-simulated).
// Nothing of Metallo's production code imports them.
//
//   - siteagent: the Site agent (a project namespace, the member's service
//     account, the Runtime's RoleBinding and kubeconfig);
//   - githost: a Git host (Gitea over HTTPS with LFS);
//   - grantprovider: the repository grant provider (real tokens at the Git
//     host);
//   - certauthority: an operator's or a Site's certificate authority;
//   - irismodel: a member's trained model (scikit-learn's iris classifier).
package standins
