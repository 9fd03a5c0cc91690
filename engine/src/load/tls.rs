//! rustls client setup: one config (and so one session cache) per worker.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{ClientSessionMemoryCache, Resumption};
use rustls::crypto::{CryptoProvider, verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};

use crate::error::SetupError;

/// What every worker needs to open TLS connections.
#[derive(Debug, Clone)]
pub struct TlsPlan {
    pub server_name: ServerName<'static>,
    pub insecure: bool,
    pub resume: bool,
    /// The application protocols offered by ALPN, preferred first.
    pub alpn: &'static [&'static [u8]],
}

impl TlsPlan {
    pub fn new(
        host: &str,
        insecure: bool,
        resume: bool,
        alpn: &'static [&'static [u8]],
    ) -> Result<TlsPlan, SetupError> {
        let server_name = ServerName::try_from(host.to_string())
            .map_err(|e| SetupError::new("URL", host, format!("not a valid TLS server name: {e}")))?;
        Ok(TlsPlan { server_name, insecure, resume, alpn })
    }

    /// A fresh client config with its own session cache (when resuming).
    pub fn client_config(&self) -> Arc<ClientConfig> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .expect("ring supports the default protocol versions");
        let mut config = if self.insecure {
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AcceptAnyCert(provider)))
                .with_no_client_auth()
        } else {
            let roots = RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.to_vec() };
            builder.with_root_certificates(roots).with_no_client_auth()
        };
        config.alpn_protocols = self.alpn.iter().map(|p| p.to_vec()).collect();
        config.resumption = if self.resume {
            Resumption::store(Arc::new(ClientSessionMemoryCache::new(256)))
        } else {
            Resumption::disabled()
        };
        Arc::new(config)
    }
}

/// `--insecure`: any certificate is accepted, signatures are still checked.
#[derive(Debug)]
struct AcceptAnyCert(Arc<CryptoProvider>);

impl ServerCertVerifier for AcceptAnyCert {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// Protocol and cipher names of an established connection.
pub fn negotiated(conn: &rustls::ClientConnection) -> (String, String, Option<String>) {
    let protocol = conn.protocol_version().map_or("unknown".to_string(), |v| match v {
        rustls::ProtocolVersion::TLSv1_3 => "TLSv1.3".to_string(),
        rustls::ProtocolVersion::TLSv1_2 => "TLSv1.2".to_string(),
        other => format!("{other:?}"),
    });
    let cipher = conn.negotiated_cipher_suite().map_or("unknown".to_string(), |s| {
        s.suite().as_str().map_or_else(|| format!("{:?}", s.suite()), str::to_string)
    });
    let alpn = conn.alpn_protocol().map(|p| String::from_utf8_lossy(p).into_owned());
    (protocol, cipher, alpn)
}
