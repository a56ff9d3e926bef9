package v1alpha1

// Identity says where the cluster's users come from (docs/identity.md). Unset: the jail's own
// /etc/passwd and /etc/group, with users made by adduser on a login node.
type Identity struct {
	// SSSD runs SSSD beside slurmctld and in every login and worker pod, configured from a
	// Secret, so that the site's LDAP directory (OpenLDAP, FreeIPA's or Active Directory's LDAP
	// service, through SSSD's ldap provider) resolves user and group names for slurmctld (job credentials, AllowGroups), for sshd and for every job in
	// the jail: `id alice` on a login node and in a job agree. The jail's own users (root,
	// users made by adduser) keep working: files are looked up first.
	SSSD SSSD `json:"sssd"`
}

// SSSD configures the SSSD that resolves the site's users.
type SSSD struct {
	// ConfigSecretName names a Secret in the cluster's namespace. Its key sssd.conf is SSSD's
	// configuration (sssd.conf(5), sssd-ldap(5); services must include nss and pam, and ssh for
	// sshKeys); every key is
	// mounted, read-only and readable by root only, in /etc/sssd/secret/ (a CA certificate for
	// ldap_tls_cacert = /etc/sssd/secret/ca.crt, a bind password file). A change to the Secret
	// rolls the pods that run SSSD.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	ConfigSecretName string `json:"configSecretName"`

	// SSHKeys lets sshd on login and worker nodes take a user's public keys from the directory
	// through SSSD (sss_ssh_authorizedkeys: ldap_user_ssh_public_key in sssd.conf names the
	// attribute, most often sshPublicKey), besides ~/.ssh/authorized_keys.
	// +kubebuilder:default=true
	// +optional
	SSHKeys *bool `json:"sshKeys,omitempty"`

	// CreateHomeDirectories makes a directory user's home in the jail at their first login on a
	// login node (pam_mkhomedir, from /etc/skel, mode 0700), where the directory's
	// homeDirectory says. Off: homes must exist already (a sub-mount of spec.volumeSources over
	// /home, made by the site).
	// +kubebuilder:default=true
	// +optional
	CreateHomeDirectories *bool `json:"createHomeDirectories,omitempty"`
}

// SSSDEnabled reports whether the cluster's pods run SSSD (spec.identity.sssd).
func (sc *SlurmCluster) SSSDEnabled() bool { return sc.Spec.Identity != nil }

// SSSDSSHKeys reports whether sshd asks SSSD for users' keys (spec.identity.sssd.sshKeys, on
// when unset).
func (sc *SlurmCluster) SSSDSSHKeys() bool {
	return sc.SSSDEnabled() && (sc.Spec.Identity.SSSD.SSHKeys == nil || *sc.Spec.Identity.SSSD.SSHKeys)
}

// SSSDCreatesHomes reports whether login nodes make a directory user's home at first login
// (spec.identity.sssd.createHomeDirectories, on when unset).
func (sc *SlurmCluster) SSSDCreatesHomes() bool {
	return sc.SSSDEnabled() && (sc.Spec.Identity.SSSD.CreateHomeDirectories == nil || *sc.Spec.Identity.SSSD.CreateHomeDirectories)
}
