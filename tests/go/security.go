package main

import (
	"os"

	"github.com/apache/pulsar-client-go/pulsar"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/admin/config"
)

// The broker's TLS and authentication settings, given by the conformance command in the environment:
// HARNESS_AUTH_PLUGIN with HARNESS_AUTH_PARAMS_JSON (the plugin's parameters as the JSON object Go's
// NewAuthentication reads), HARNESS_TLS_TRUST_CERTS_FILE_PATH, HARNESS_TLS_ALLOW_INSECURE_CONNECTION and
// HARNESS_TLS_VALIDATE_HOSTNAME ("true"). None set means none used.

// secureClient sets the client options' authentication and TLS settings from the environment.
func secureClient(options *pulsar.ClientOptions) error {
	if plugin := os.Getenv("HARNESS_AUTH_PLUGIN"); plugin != "" {
		authentication, err := pulsar.NewAuthentication(plugin, os.Getenv("HARNESS_AUTH_PARAMS_JSON"))
		if err != nil {
			return err
		}
		options.Authentication = authentication
	}
	options.TLSTrustCertsFilePath = os.Getenv("HARNESS_TLS_TRUST_CERTS_FILE_PATH")
	options.TLSAllowInsecureConnection = os.Getenv("HARNESS_TLS_ALLOW_INSECURE_CONNECTION") == "true"
	options.TLSValidateHostname = os.Getenv("HARNESS_TLS_VALIDATE_HOSTNAME") == "true"
	return nil
}

// secureAdmin sets the admin client's configuration from the same environment.
func secureAdmin(cfg *config.Config) *config.Config {
	cfg.AuthPlugin = os.Getenv("HARNESS_AUTH_PLUGIN")
	cfg.AuthParams = os.Getenv("HARNESS_AUTH_PARAMS_JSON")
	cfg.TLSTrustCertsFilePath = os.Getenv("HARNESS_TLS_TRUST_CERTS_FILE_PATH")
	cfg.TLSAllowInsecureConnection = os.Getenv("HARNESS_TLS_ALLOW_INSECURE_CONNECTION") == "true"
	cfg.TLSEnableHostnameVerification = os.Getenv("HARNESS_TLS_VALIDATE_HOSTNAME") == "true"
	return cfg
}
